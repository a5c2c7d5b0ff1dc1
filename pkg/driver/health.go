package driver

import (
	"context"
	"sync"
	"time"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/pkg/backend"
	"github.com/tessera-gpu/tessera/pkg/inventory"
	"github.com/tessera-gpu/tessera/pkg/metrics"
	"github.com/tessera-gpu/tessera/pkg/slices"
)

// healthResend is how often a full report is re-sent. The kubelet marks a
// device Unknown after its HealthCheckTimeout (30 s by default) without one.
const healthResend = 10 * time.Second

// healthHub keeps the last health of each device UUID from the backend and
// wakes the kubelet's health streams when it changes.
type healthHub struct {
	devices func() *slices.Result
	metrics *metrics.Metrics

	mu      sync.Mutex
	byUUID  map[string]inventory.Health
	changed chan struct{} // closed and replaced on each change
}

func newHealthHub(devices func() *slices.Result, m *metrics.Metrics) *healthHub {
	return &healthHub{devices: devices, metrics: m, byUUID: map[string]inventory.Health{}, changed: make(chan struct{})}
}

// run feeds backend events into the hub until ctx ends.
func (h *healthHub) run(ctx context.Context, b backend.Backend) {
	events := make(chan backend.HealthEvent, 16)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-events:
				klog.FromContext(ctx).Info("Device health changed", "uuid", ev.UUID, "health", ev.Health.State, "kind", ev.Kind, "reason", ev.Health.Reason)
				h.metrics.HealthEvent(ev.Kind, string(ev.Health.State))
				h.mu.Lock()
				h.byUUID[ev.UUID] = ev.Health
				close(h.changed)
				h.changed = make(chan struct{})
				h.mu.Unlock()
			}
		}
	}()
	if err := b.WatchHealth(ctx, events); err != nil && ctx.Err() == nil {
		klog.FromContext(ctx).Error(err, "Health watch ended; devices keep their last reported health")
	}
}

// report builds a report covering every published device.
func (h *healthHub) report() (kubeletplugin.DeviceHealthReport, <-chan struct{}) {
	res := h.devices()
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	var rep kubeletplugin.DeviceHealthReport
	for _, name := range res.Order {
		e := res.Devices[name]
		hl := e.GPU.Health
		if v, ok := h.byUUID[e.GPU.UUID]; ok {
			hl = v
		}
		if e.Partition != nil {
			// A partition is no healthier than its GPU.
			if v, ok := h.byUUID[e.Partition.UUID]; ok && hl.State != inventory.Unhealthy {
				hl = v
			}
		}
		rep.Devices = append(rep.Devices, kubeletplugin.DeviceHealth{
			PoolName:    res.Pool,
			DeviceName:  name,
			Health:      toStatus(hl.State),
			LastUpdated: now,
			Message:     hl.Reason,
		})
	}
	return rep, h.changed
}

func toStatus(s inventory.HealthState) kubeletplugin.HealthStatus {
	switch s {
	case inventory.Healthy, "":
		return kubeletplugin.HealthStatusHealthy
	case inventory.Unhealthy:
		return kubeletplugin.HealthStatusUnhealthy
	default:
		return kubeletplugin.HealthStatusUnknown
	}
}

// WatchHealthStatus streams device health to the kubelet: a full report at
// once, again on every change, and at least every healthResend.
func (d *Driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	t := time.NewTicker(healthResend)
	defer t.Stop()
	for {
		rep, changed := d.health.report()
		select {
		case <-ctx.Done():
			return nil
		case reports <- rep:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-t.C:
		}
	}
}
