//go:build cgo && linux

package nvml

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/backend"
)

// Health signals. One WatchHealth call does all of its work on the calling
// goroutine, in one loop:
//
//   - it waits on an NVML event set (XID, single- and double-bit ECC
//     events of every GPU that supports them) for at most eventWait at a
//     time, so it notices ctx ending within a second;
//   - every poll interval it probes each GPU (health_gpu.go) and reads its
//     counters (health_counters.go), reporting only what changed.
//
// A GPU that answers ERROR_GPU_IS_LOST is reported once and then only
// probed, one cheap call per poll, until it answers again.

const (
	// defaultHealthPoll is Options.HealthPollInterval's default.
	defaultHealthPoll = 30 * time.Second
	// eventWait bounds one nvmlEventSetWait, so a cancelled ctx is noticed.
	eventWait = time.Second
)

// errClosed: the backend was closed under a running WatchHealth; NVML is
// shut down and nothing can be read any more.
var errClosed = errors.New("backend is closed")

// WatchHealth implements backend.Backend: it sends health events until ctx
// ends, then frees its event set and returns nil, within eventWait. It
// fails at once only when the backend is closed (and with an error if it
// is closed under it: cancel ctx and let WatchHealth return before Close);
// a GPU or an event set that cannot be used is logged and the rest is
// watched.
func (b *Backend) WatchHealth(ctx context.Context, events chan<- backend.HealthEvent) error {
	w := &healthWatch{
		b:        b,
		events:   events,
		logger:   klog.FromContext(ctx).WithValues("backend", "nvml"),
		interval: b.healthPoll,
		byIndex:  map[int]*gpuHealth{},
		noID:     map[int]string{},
	}
	if err := w.refreshGPUs(); err != nil {
		return fmt.Errorf("nvml: watching health: %w", err)
	}
	err := w.run(ctx)
	if errors.Is(err, errClosed) {
		w.set = nil // the NVML session ended with its sets; nothing to free
	}
	w.freeSet()
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("nvml: watching health: %w", err)
	}
	return nil
}

// healthWatch is the state of one WatchHealth call; only its goroutine
// touches it.
type healthWatch struct {
	b        *Backend
	events   chan<- backend.HealthEvent
	logger   klog.Logger
	interval time.Duration

	gpus    []*gpuHealth // in NVML index order
	byIndex map[int]*gpuHealth
	// noID is the last error reported per index of a GPU not identified.
	noID map[int]string

	set nvml.EventSet // nil: no event set (polling only)
	// setStale asks for the event set to be rebuilt at the next poll: a GPU
	// joined, was lost or came back, or the set failed.
	setStale bool
	// waitOff stops event waits until the next poll, after a wait failed
	// in a way no GPU explains (so a failing set cannot spin the loop).
	waitOff bool
	// setErr is the last event set failure logged, so it is logged once.
	setErr string
}

// run is the loop: poll when due, otherwise wait for an event or the next
// poll, whichever comes first.
func (w *healthWatch) run(ctx context.Context) error {
	next := time.Now()
	for {
		if ctx.Err() != nil {
			return nil
		}
		if !time.Now().Before(next) {
			if err := w.poll(ctx); err != nil {
				return err
			}
			next = time.Now().Add(w.interval)
		}
		wait := min(eventWait, time.Until(next))
		if wait < time.Millisecond {
			wait = time.Millisecond
		}
		if w.set == nil || w.waitOff || w.registered() == 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
			continue
		}
		data, ret := w.set.Wait(uint32(wait / time.Millisecond))
		w.onWait(ctx, data, ret)
	}
}

// poll is one round: pick up GPUs that got a handle since, probe and read
// every GPU, then rebuild the event set if a GPU joined, left or came back
// (or the set failed).
func (w *healthWatch) poll(ctx context.Context) error {
	if err := w.refreshGPUs(); err != nil {
		return err
	}
	w.waitOff = false
	for _, g := range w.gpus {
		if ctx.Err() != nil {
			return nil
		}
		w.pollGPU(ctx, g)
	}
	if w.setStale {
		w.rebuildSet(ctx)
	}
	return nil
}

// refreshGPUs adds the GPUs that have an NVML handle now and had none
// before (Discover retries failed lookups). A GPU is watched by the UUID
// Discover publishes it under: the one it answers, or, where it answers
// ERROR_GPU_IS_LOST, the one an earlier discovery read (lost.go), so its
// loss reaches its device. A GPU it cannot identify at all is reported
// (once per index and error, at the always-on level) and tried again at
// every poll: it has no device to taint, Discover leaves it out and the
// agent counts it (tessera_gpus_unpublished).
func (w *healthWatch) refreshGPUs() error {
	w.b.mu.Lock()
	if w.b.closed {
		w.b.mu.Unlock()
		return errClosed
	}
	handles := append([]nvml.Device(nil), w.b.handles...)
	handleErrs := maps.Clone(w.b.handleErrs)
	ids := maps.Clone(w.b.ids)
	w.b.mu.Unlock()
	for i, h := range handles {
		if w.byIndex[i] != nil {
			continue
		}
		if h == nil {
			w.unidentified(i, handleErrs[i])
			continue
		}
		uuid, ret := h.GetUUID()
		err := check("nvmlDeviceGetUUID", ret)
		if id, ok := ids[i]; ok && lostErr(err) {
			uuid, err = id.uuid, nil
		}
		if err != nil {
			w.unidentified(i, err)
			continue
		}
		delete(w.noID, i)
		g := newGPUHealth(i, uuid, h)
		w.byIndex[i] = g
		w.gpus = append(w.gpus, g)
		w.setStale = true
	}
	return nil
}

// unidentified reports a GPU the watch cannot name, once per error.
func (w *healthWatch) unidentified(i int, err error) {
	msg := fmt.Sprint(err)
	if w.noID[i] == msg {
		return
	}
	w.noID[i] = msg
	w.logger.Info("GPU health not watched: the GPU cannot be identified; trying again every poll", "index", i, "lost", lostErr(err), "err", err)
}

// send delivers one event unless ctx ends first.
func (w *healthWatch) send(ctx context.Context, ev backend.HealthEvent) {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	w.logger.V(2).Info("Health signal", "uuid", ev.UUID, "kind", ev.Kind, "code", ev.Code, "count", ev.Count, "message", ev.Message)
	select {
	case w.events <- ev:
	case <-ctx.Done():
	}
}
