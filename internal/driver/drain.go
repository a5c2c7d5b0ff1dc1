package driver

import (
	"errors"
	"sync"
	"time"
)

// DefaultDrainTimeout is how long a stopping agent lets the kubelet's calls
// in flight finish: below the pod's 30 s termination grace period, above a
// prepare's usual few seconds (a MIG carve, an MPS daemon pod's start).
const DefaultDrainTimeout = 15 * time.Second

// drainFlush is how long Stop waits after the last call in flight
// returned, for its answer to be written: the helper's gRPC server stops
// without draining its connections, and an answer it has not written yet is
// lost (the kubelet then retries, and the next agent answers from the
// checkpoint).
const drainFlush = 100 * time.Millisecond

// errStopping answers a call that arrives once the agent is stopping.
var errStopping = errors.New("this agent is stopping; the kubelet retries the call with the agent that replaces it")

// inflight counts the kubelet's calls in flight, so that Stop lets them
// finish before the gRPC server goes. A prepare cut off mid-way (the
// server's stop cancels its context) leaves its claim PrepareStarted, and
// the next agent rolls it back before it serves anything: during an
// upgrade's handover that was seconds of every new pod's wait.
type inflight struct {
	mu       sync.Mutex
	n        int
	stopping bool
	idle     chan struct{} // closed when n drops to 0 while stopping
}

// enter admits one call, unless the agent is stopping.
func (f *inflight) enter() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopping {
		return errStopping
	}
	f.n++
	return nil
}

// leave ends a call enter admitted.
func (f *inflight) leave() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.n == 0 && f.idle != nil {
		close(f.idle)
		f.idle = nil
	}
}

// drain refuses every later call and waits up to timeout for those in
// flight; it returns how many were still running when it gave up.
func (f *inflight) drain(timeout time.Duration) int {
	f.mu.Lock()
	f.stopping = true
	if f.n == 0 {
		f.mu.Unlock()
		return 0
	}
	if f.idle == nil {
		f.idle = make(chan struct{})
	}
	idle := f.idle
	f.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-idle:
		time.Sleep(drainFlush)
		return 0
	case <-t.C:
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.n
	}
}
