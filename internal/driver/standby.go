package driver

import (
	"context"
	"errors"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
)

// Standby is the kubelet plugin of an agent that does not serve the node
// yet, because another agent of the node holds its lock (internal/handover):
// registered with the kubelet beside that agent, so that the calls the
// kubelet sends it wait for the takeover instead of failing. Start of the
// Driver whose Options carry it takes it over.
type Standby struct {
	helper *kubeletplugin.Helper
	gate   *standbyGate
}

// StartStandby registers a plugin whose calls wait for a Driver.
func StartStandby(ctx context.Context, o PluginOptions) (*Standby, error) {
	g := &standbyGate{ready: make(chan struct{})}
	helper, err := startPlugin(ctx, g, o)
	if err != nil {
		return nil, err
	}
	return &Standby{helper: helper, gate: g}, nil
}

// Ready is the standby's readiness: registered with the kubelet, so that a
// rolling update may end the agent it waits for.
func (s *Standby) Ready(context.Context) error {
	st := s.helper.RegistrationStatus()
	switch {
	case st == nil:
		return errors.New("standby: not registered with the kubelet yet")
	case !st.PluginRegistered:
		return fmt.Errorf("standby: the kubelet rejected the registration: %s", st.Error)
	}
	return nil
}

// Stop unregisters a standby that never took over.
func (s *Standby) Stop() { s.helper.Stop() }

// standbyGate is the kubelet plugin of a Standby: each call waits until a Driver
// takes over (set), or the call's context ends, then is the Driver's.
type standbyGate struct {
	ready chan struct{}
	d     *Driver
}

func (g *standbyGate) set(d *Driver) {
	g.d = d
	close(g.ready)
}

func (g *standbyGate) wait(ctx context.Context) (*Driver, error) {
	select {
	case <-g.ready:
		return g.d, nil
	default:
	}
	klog.FromContext(ctx).V(2).Info("Kubelet call waits for this agent to take over the node")
	select {
	case <-g.ready:
		return g.d, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("this agent is in standby: another agent of the node still serves it (%w)", context.Cause(ctx))
	}
}

func (g *standbyGate) PrepareResourceClaims(ctx context.Context, cs []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	d, err := g.wait(ctx)
	if err != nil {
		return nil, err
	}
	return d.PrepareResourceClaims(ctx, cs)
}

func (g *standbyGate) UnprepareResourceClaims(ctx context.Context, cs []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	d, err := g.wait(ctx)
	if err != nil {
		return nil, err
	}
	return d.UnprepareResourceClaims(ctx, cs)
}

func (g *standbyGate) HandleError(ctx context.Context, err error, msg string) {
	select {
	case <-g.ready:
		g.d.HandleError(ctx, err, msg)
	default:
		// Nothing published yet: a standby's helper reports only its own
		// gRPC servers' failures.
		klog.FromContext(ctx).Error(err, msg+" (standby)")
	}
}

// WatchHealthStatus waits for the takeover too: a standby knows no health.
func (g *standbyGate) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	select {
	case <-g.ready:
		return g.d.WatchHealthStatus(ctx, reports)
	case <-ctx.Done():
		return nil
	}
}
