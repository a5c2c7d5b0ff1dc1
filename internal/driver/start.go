package driver

import (
	"context"
	"fmt"
	"time"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// Start registers with the kubelet, publishes the node's ResourceSlices and
// starts health monitoring. Stop ends all of it.
func (d *Driver) Start(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	var helper *kubeletplugin.Helper
	if s := d.opts.Standby; s != nil {
		// Registered already; its waiting calls are ours from now.
		helper = s.helper
		s.gate.set(d)
	} else {
		var err error
		helper, err = startPlugin(ctx, d, PluginOptions{NodeName: d.opts.NodeName, KubeClient: d.opts.KubeClient,
			PluginDataDir: d.opts.PluginDataDir, RegistrarDir: d.opts.RegistrarDir, DeviceMetadata: d.opts.DeviceMetadata, CDIDir: d.opts.CDIDir})
		if err != nil {
			return err
		}
	}
	d.helper = helper
	d.pub.start(helper.PublishResources)
	// The backend's health watch gets a context of its own, which Stop
	// ends and then waits on: the backend (an NVML session) is closed after
	// Stop, and must not be closed under a running watch.
	hctx, hcancel := context.WithCancel(ctx)
	d.healthStop, d.healthDone = hcancel, make(chan struct{})
	go func() {
		defer close(d.healthDone)
		d.health.run(hctx, d.opts.Backend)
	}()
	if g, ok := d.opts.Backend.(backend.Generationer); ok {
		every := d.opts.InventoryPoll
		if every <= 0 {
			every = 5 * time.Second
		}
		go d.watchInventory(ctx, g, every)
	}
	if d.opts.Partitioning == publish.Dynamic {
		every := d.opts.OrphanRetry
		if every <= 0 {
			every = time.Minute
		}
		go d.retryWithheld(ctx, every)
	}
	every := d.opts.SharingCheck
	if every <= 0 {
		every = 30 * time.Second
	}
	go d.watchSharing(ctx, every)
	go d.retryLabel(ctx, 5*time.Second)
	go d.watchIMEX(ctx, imexPoll)
	if err := d.pub.publish(ctx, unchanged); err != nil {
		helper.Stop()
		return fmt.Errorf("publish ResourceSlices: %w", err)
	}
	res := d.Published()
	logger.Info("Publishing devices", "node", d.opts.NodeName, "pool", res.Pool, "devices", len(res.Order))
	return nil
}

// Stop unregisters from the kubelet. Published slices stay: a restarting
// agent takes them over, and deleting them would make pending pods
// unschedulable for the length of the restart.
//
// Calls in flight finish first (up to Options.DrainTimeout) and later ones
// are refused, so that no prepare is cut off half-way.
func (d *Driver) Stop() {
	start := time.Now()
	if left := d.calls.drain(d.opts.DrainTimeout); left > 0 {
		klog.Background().Info("Stopping with kubelet calls still in flight; the next agent rolls back what they left", "calls", left, "waited", d.opts.DrainTimeout)
	} else if took := time.Since(start); took > 10*time.Millisecond {
		klog.Background().Info("Kubelet calls in flight finished before stopping", "waited", took)
	}
	if d.helper != nil {
		d.helper.Stop()
	}
	if d.pub != nil {
		d.pub.stopChannels()
	}
	if d.healthStop != nil {
		d.healthStop()
		select {
		case <-d.healthDone:
		case <-time.After(10 * time.Second):
			klog.Background().Info("Health watch did not stop within 10s")
		}
	}
	if d.claims == nil {
		return
	}
	if err := d.claims.Close(); err != nil {
		klog.Background().Error(err, "Leave the checkpoint current in both of its files")
	}
}
