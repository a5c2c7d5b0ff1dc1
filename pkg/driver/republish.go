package driver

import (
	"context"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/pkg/backend"
	"github.com/tessera-gpu/tessera/pkg/publish"
)

// Republish rediscovers the node and publishes its slices again if they
// changed.
func (d *Driver) Republish(ctx context.Context) error {
	d.sendMu.Lock()
	defer d.sendMu.Unlock()
	if err := d.Refresh(ctx); err != nil {
		return err
	}
	res := d.Published()
	if d.sent != nil && apiequality.Semantic.DeepEqual(*d.sent, res.Resources) {
		klog.FromContext(ctx).V(4).Info("Devices unchanged, nothing to publish", "pool", res.Pool)
		return nil
	}
	if err := d.send(ctx, res); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Republished devices", "pool", res.Pool, "devices", len(res.Order))
	return nil
}

// send hands res to the helper, under sendMu. The hardware changes in
// steps (MIG mode, then the partition; the partition, then MIG mode) and
// each step bumps the backend's generation; only the steps that change
// the slices reach the helper, whose controller, handed the same slices
// twice in quick succession, may write them twice.
func (d *Driver) send(ctx context.Context, res *publish.Result) error {
	if d.helper != nil {
		if err := d.helper.PublishResources(ctx, res.Resources); err != nil {
			return err
		}
	}
	d.sent = &res.Resources
	return nil
}

// watchInventory republishes whenever a backend that can change under the
// agent reports a new generation. Polling is cheap (a sysfs read, a few
// NVML queries per GPU) and needs nothing from the backend beyond
// Generation.
func (d *Driver) watchInventory(ctx context.Context, g backend.Generationer, every time.Duration) {
	logger := klog.FromContext(ctx)
	last, err := g.Generation()
	if err != nil {
		logger.Error(err, "Read inventory generation")
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		cur, err := g.Generation()
		if err != nil {
			logger.Error(err, "Read inventory generation")
			return
		}
		if cur == last {
			return
		}
		logger.Info("Inventory changed", "generation", cur, "previous", last)
		if err := d.Republish(ctx); err != nil {
			// Keep the old generation so the next tick tries again.
			logger.Error(err, "Republish after inventory change")
			return
		}
		last = cur
	}, every)
}
