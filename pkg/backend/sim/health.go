package sim

import (
	"context"
	"time"

	"github.com/tessera-gpu/tessera/pkg/backend"
)

// Health: the simulator's GPUs stay healthy unless told otherwise.
// InjectHealth is the one way in, so fault injection (a later feature)
// only has to decide what to inject and when.

// watcher is one WatchHealth call.
type watcher struct {
	ch   chan backend.HealthEvent
	done chan struct{}
}

// WatchHealth implements backend.Backend: it forwards injected events to
// events until ctx ends, then returns nil.
func (b *Backend) WatchHealth(ctx context.Context, events chan<- backend.HealthEvent) error {
	w := &watcher{ch: make(chan backend.HealthEvent), done: make(chan struct{})}
	b.mu.Lock()
	b.watchers[w] = struct{}{}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.watchers, w)
		b.mu.Unlock()
		close(w.done)
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-w.ch:
			select {
			case events <- ev:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// InjectHealth records ev as the health of the GPU it names (partitions
// have no health of their own in the inventory; their events are passed on
// only) and delivers it to every running WatchHealth. It returns once each
// watcher has taken the event or stopped. A zero ev.Time is set to now.
func (b *Backend) InjectHealth(ev backend.HealthEvent) {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	b.mu.Lock()
	if g, err := b.gpu(ev.UUID); err == nil {
		g.Health = ev.Health
	}
	ws := make([]*watcher, 0, len(b.watchers))
	for w := range b.watchers {
		ws = append(ws, w)
	}
	b.mu.Unlock()
	for _, w := range ws {
		select {
		case w.ch <- ev:
		case <-w.done:
		}
	}
}

// watcherCount reports how many WatchHealth calls are running (tests wait
// on it before injecting).
func (b *Backend) watcherCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.watchers)
}
