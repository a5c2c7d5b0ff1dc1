package driver

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// watchSharing keeps prepared claims' sharing in place between prepares: an
// MPS daemon that died (killed, out of memory) is started again, so the
// claim's next containers find it, and counted in
// tessera_mps_daemon_restarts_total. Intervals are not re-applied here:
// only a reboot resets them, and the agent applies them again at start.
func (d *Driver) watchSharing(ctx context.Context, every time.Duration) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if _, err := d.claims.EnsureSharing(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Check sharing settings of prepared claims")
		}
	}, every)
}
