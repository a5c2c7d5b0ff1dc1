package podresources

import (
	"context"
	"time"

	"github.com/tessera-gpu/tessera/internal/poll"
)

// Poller keeps the last set of this driver's allocations the kubelet
// named. Each poll replaces the whole set, so a pod that ended is gone
// after the next poll; a kubelet away for more than poll.KeepFailed polls
// leaves no holder the agent cannot vouch for.
type Poller = poll.Last[[]Allocation]

// NewPoller lists driver's allocations on the kubelet's socket every
// interval; failed, if set, counts each failed poll.
func NewPoller(socket, driver string, interval time.Duration, failed func()) *Poller {
	return &Poller{
		What:      "the kubelet's pod resources",
		Read:      func(ctx context.Context) ([]Allocation, error) { return List(ctx, socket, driver) },
		Interval:  interval,
		Failed:    failed,
		LogValues: []any{"socket", socket},
	}
}
