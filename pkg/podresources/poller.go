package podresources

import (
	"context"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// KeepFailed is how many failed polls in a row the last good set survives
// (the kubelet restarting takes a poll or two); the next failure drops it,
// so a node whose kubelet stays away exports no holder it cannot vouch for.
const KeepFailed = 2

// maxTimeout bounds one List: the kubelet answers from memory.
const maxTimeout = 5 * time.Second

// Poller polls the kubelet's PodResources API and holds the last set of
// this driver's allocations. Each poll replaces the whole set, so a pod
// that ended is gone after the next poll.
type Poller struct {
	Socket, Driver string
	Interval       time.Duration
	// Failed, if set, is called once per failed poll (a counter).
	Failed func()

	mu       sync.Mutex
	set      []Allocation
	failures int
}

// Run polls at once, then every Interval, until ctx ends.
func (p *Poller) Run(ctx context.Context) {
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	for {
		p.Poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Poll asks the kubelet once and replaces the set, or counts a failure.
func (p *Poller) Poll(ctx context.Context) {
	logger := klog.FromContext(ctx)
	timeout := maxTimeout
	if p.Interval > 0 && p.Interval < timeout {
		timeout = p.Interval
	}
	lctx, cancel := context.WithTimeout(ctx, timeout)
	set, err := List(lctx, p.Socket, p.Driver)
	cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		if p.failures > 0 {
			logger.Info("Kubelet pod resources answer again", "socket", p.Socket, "failedPolls", p.failures)
		}
		p.set, p.failures = set, 0
		return
	}
	if ctx.Err() != nil {
		return // shutting down, not a failure of the kubelet
	}
	p.failures++
	if p.Failed != nil {
		p.Failed()
	}
	switch {
	case p.failures == 1:
		logger.Error(err, "Listing the kubelet's pod resources; tessera_device_allocation_info keeps the last answer for a few polls", "socket", p.Socket)
	case p.failures == KeepFailed+1:
		logger.Info("Kubelet pod resources still unanswered: dropping the pods they last named", "socket", p.Socket, "failedPolls", p.failures, "err", err.Error())
	default:
		logger.V(4).Info("Listing the kubelet's pod resources", "socket", p.Socket, "failedPolls", p.failures, "err", err.Error())
	}
	if p.failures > KeepFailed {
		p.set = nil
	}
}

// Current is the last good set (nil before the first and after too many
// failures). Callers must not modify it.
func (p *Poller) Current() []Allocation {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.set
}
