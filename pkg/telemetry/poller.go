package telemetry

import (
	"context"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// DefaultInterval is the agent's --telemetry-poll default: the same as a
// typical Prometheus scrape interval, so each scrape sees a fresh poll
// without polling the hardware more often than anyone looks.
const DefaultInterval = 10 * time.Second

// KeepFailed is how many failed polls in a row the last snapshot survives
// (a driver busy for a moment); the next failure drops it, so the agent
// does not go on exporting readings it can no longer take.
const KeepFailed = 2

// maxTimeout bounds one read: NVML and sysfs answer in milliseconds.
const maxTimeout = 5 * time.Second

// Snapshot is the result of one successful poll.
type Snapshot struct {
	Time    time.Time
	Samples []Sample
}

// Poller reads telemetry every Interval and keeps the latest snapshot.
// Poll and Run are for one goroutine; Current, Failures may be called from
// any (a scrape).
type Poller struct {
	// Read takes one reading of every device: a backend's
	// backend.TelemetryReader.ReadTelemetry. It leaves a field it cannot
	// read unknown and fails only when it could read nothing.
	Read     func(context.Context) ([]Sample, error)
	Interval time.Duration
	// Failed, if set, is called once per failed poll (a counter).
	Failed func()

	latest   atomic.Pointer[Snapshot]
	failures atomic.Uint64 // in a row
	total    atomic.Uint64
}

// Run polls at once, then every Interval, until ctx ends.
func (p *Poller) Run(ctx context.Context) {
	interval := p.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	t := time.NewTicker(interval)
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

// Poll reads once and replaces the snapshot, or counts a failure.
func (p *Poller) Poll(ctx context.Context) {
	logger := klog.FromContext(ctx)
	timeout := maxTimeout
	if p.Interval > 0 && p.Interval < timeout {
		timeout = p.Interval
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	samples, err := p.Read(rctx)
	cancel()
	if err == nil {
		if n := p.failures.Swap(0); n > 0 {
			logger.Info("Device telemetry readable again", "failedPolls", n)
		}
		p.latest.Store(&Snapshot{Time: time.Now(), Samples: samples})
		return
	}
	if ctx.Err() != nil {
		return // shutting down, not a failure of the devices
	}
	n := p.failures.Add(1)
	p.total.Add(1)
	if p.Failed != nil {
		p.Failed()
	}
	switch {
	case n == 1:
		logger.Error(err, "Reading device telemetry; the last readings stay exported for a few polls")
	case n == KeepFailed+1:
		logger.Info("Device telemetry still unreadable: dropping the last readings", "failedPolls", n, "err", err.Error())
	default:
		logger.V(4).Info("Reading device telemetry", "failedPolls", n, "err", err.Error())
	}
	if n > KeepFailed {
		p.latest.Store(nil)
	}
}

// Current is the latest snapshot: nil before the first good poll and after
// too many failures. Callers must not modify it.
func (p *Poller) Current() *Snapshot { return p.latest.Load() }

// Failures is the number of failed polls since the poller started.
func (p *Poller) Failures() uint64 { return p.total.Load() }
