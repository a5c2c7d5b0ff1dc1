package driver

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/pkg/backend"
)

// Republish rediscovers the node and publishes its slices again.
func (d *Driver) Republish(ctx context.Context) error {
	if err := d.Refresh(ctx); err != nil {
		return err
	}
	res := d.Published()
	if d.helper != nil {
		if err := d.helper.PublishResources(ctx, res.Resources); err != nil {
			return err
		}
	}
	klog.FromContext(ctx).Info("Republished devices", "pool", res.Pool, "devices", len(res.Order))
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
