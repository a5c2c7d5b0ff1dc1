package driver

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/backend"
)

// watchInventory republishes whenever a backend that can change under the
// agent reports a new generation, and otherwise opens the placement window
// when it is due (openWindow). Polling is cheap (a sysfs read, a few
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
			if err := d.openWindow(ctx); err != nil {
				logger.Error(err, "Republish to open the placement window")
			}
			return
		}
		logger.Info("Inventory changed", "generation", cur, "previous", last)
		if err := d.pub.publish(ctx, inventoryChanged); err != nil {
			// Keep the old generation so the next tick tries again.
			logger.Error(err, "Republish after inventory change")
			return
		}
		last = cur
	}, every)
}
