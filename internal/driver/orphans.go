package driver

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// retryWithheld sweeps orphan partitions again while the last build
// withheld any (partitions no claim holds, left by the start-up sweep or cut
// by hand), and republishes once one goes so its slices return to the
// scheduler.
func (d *Driver) retryWithheld(ctx context.Context, every time.Duration) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := d.sweepWithheld(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Retry partitions no claim holds")
		}
	}, every)
}

// sweepWithheld is one retry: nothing to do unless a partition is withheld.
// It republishes even when the sweep destroyed nothing: the partition may
// have gone another way (an operator), which a backend's generation does
// not always tell; an unchanged publish writes nothing to the API server.
func (d *Driver) sweepWithheld(ctx context.Context) error {
	if !withholds(d.Published()) {
		return nil
	}
	if _, err := d.claims.SweepOrphans(ctx); err != nil {
		return err
	}
	return d.pub.publish(ctx, inventoryChanged)
}
