package poll

import (
	"context"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// KeepFailed is how many failed polls in a row the last answer survives;
// the next failure drops it.
const KeepFailed = 2

// maxTimeout bounds one read: every source answers from memory or sysfs
// in milliseconds.
const maxTimeout = 5 * time.Second

// Last reads Read every Interval and keeps the last good answer. Poll and
// Run are for one goroutine; Current and Failures may be called from any
// (a scrape).
type Last[T any] struct {
	// What names the source in logs ("device telemetry").
	What string
	// Read takes one answer; it fails only when it could read nothing.
	Read     func(context.Context) (T, error)
	Interval time.Duration
	// Failed, if set, is called once per failed poll (a counter).
	Failed func()
	// LogValues are added to every log line of this poller ("socket", path).
	LogValues []any

	latest atomic.Pointer[T]
	inRow  atomic.Uint64
	total  atomic.Uint64
}

// Run polls at once, then every Interval, until ctx ends.
func (p *Last[T]) Run(ctx context.Context) {
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

// Poll reads once and replaces the answer, or counts a failure. A read
// gets at most one Interval (and maxTimeout), so a hung source cannot
// stack polls.
func (p *Last[T]) Poll(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues(p.LogValues...)
	timeout := maxTimeout
	if p.Interval > 0 && p.Interval < timeout {
		timeout = p.Interval
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	v, err := p.Read(rctx)
	cancel()
	if err == nil {
		if n := p.inRow.Swap(0); n > 0 {
			logger.Info("Polling "+p.What+" works again", "failedPolls", n)
		}
		p.latest.Store(&v)
		return
	}
	if ctx.Err() != nil {
		return // shutting down, not a failure of the source
	}
	n := p.inRow.Add(1)
	p.total.Add(1)
	if p.Failed != nil {
		p.Failed()
	}
	switch {
	case n == 1:
		logger.Error(err, "Polling "+p.What+"; the last answer stays exported for a few polls")
	case n == KeepFailed+1:
		logger.Info("Polling "+p.What+" still fails: dropping the last answer", "failedPolls", n, "err", err.Error())
	default:
		logger.V(4).Info("Polling "+p.What, "failedPolls", n, "err", err.Error())
	}
	if n > KeepFailed {
		p.latest.Store(nil)
	}
}

// Current is the last good answer: the zero T before the first and after
// too many failures. Callers must not modify it.
func (p *Last[T]) Current() T {
	if v := p.latest.Load(); v != nil {
		return *v
	}
	var zero T
	return zero
}

// Failures is the number of failed polls since the poller started.
func (p *Last[T]) Failures() uint64 { return p.total.Load() }
