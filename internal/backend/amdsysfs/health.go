package amdsysfs

import (
	"context"
	"time"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/backend"
)

// Health signals from sysfs, polled: amdgpu has no event interface a
// process can wait on without a vendor library. Every poll interval, for
// every GPU Discover publishes (and every one it published before):
//
//   - its PCI device directory gone is HealthLost, its return
//     HealthRecovered (health_card.go);
//   - its RAS error counters (ras.go), summed over blocks, are reported as
//     HealthRASUncorrectable and HealthRASCorrectable when they change;
//   - a GPU reset is HealthRecovered. amdgpu keeps its reset count
//     (gpu_reset_counter) out of sysfs (only DRM ioctls and KFD SMI events
//     carry it), so a reset is seen the two ways sysfs shows one: the
//     counters answering "Query currently inaccessible" during the reset and
//     readable after it, or the counters going back down (the driver
//     re-initialised the device and started counting again). KFD's
//     generation_id is not used: it moves on topology changes, not resets,
//     and is one value for the whole node.

// defaultHealthPoll is Options.HealthPollInterval's default.
const defaultHealthPoll = 30 * time.Second

// WatchHealth implements backend.Backend: it polls until ctx ends, then
// returns nil. It never fails: a GPU whose files cannot be read is logged
// and the rest are watched.
func (b *Backend) WatchHealth(ctx context.Context, events chan<- backend.HealthEvent) error {
	w := &rasWatch{
		b:      b,
		events: events,
		logger: klog.FromContext(ctx).WithValues("backend", "amd"),
		cards:  map[string]*cardHealth{},
	}
	t := time.NewTicker(b.healthPoll)
	defer t.Stop()
	for {
		w.poll(ctx)
		if b.healthPolled != nil {
			b.healthPolled()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// rasWatch is the state of one WatchHealth call.
type rasWatch struct {
	b      *Backend
	events chan<- backend.HealthEvent
	logger klog.Logger

	cards map[string]*cardHealth // by GPU UUID
	order []*cardHealth          // in the order first seen (PCI order)
	// discoverErr is the last Discover failure logged, so it is logged once.
	discoverErr string
}

// poll is one round over every GPU.
func (w *rasWatch) poll(ctx context.Context) {
	w.refreshCards(ctx)
	for _, c := range w.order {
		if ctx.Err() != nil {
			return
		}
		w.pollCard(ctx, c)
	}
}

// refreshCards adds the GPUs Discover publishes now and were not watched.
// GPUs it no longer publishes stay watched: a GPU that left the bus is
// what HealthLost is for. Discover is cached by generation_id, so this is
// one file read while nothing changes.
func (w *rasWatch) refreshCards(ctx context.Context) {
	n, err := w.b.Discover(ctx)
	if err != nil {
		if err.Error() != w.discoverErr {
			w.discoverErr = err.Error()
			w.logger.Error(err, "Listing GPUs for health failed; watching the ones known")
		}
		return
	}
	w.discoverErr = ""
	for _, g := range n.GPUs {
		if w.cards[g.UUID] != nil || g.PCIBusID == "" {
			continue
		}
		c := &cardHealth{uuid: g.UUID, bdf: g.PCIBusID, failing: map[string]string{}}
		w.cards[g.UUID] = c
		w.order = append(w.order, c)
	}
}

// send delivers one event unless ctx ends first.
func (w *rasWatch) send(ctx context.Context, ev backend.HealthEvent) {
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	w.logger.V(2).Info("Health signal", "uuid", ev.UUID, "kind", ev.Kind, "count", ev.Count, "message", ev.Message)
	select {
	case w.events <- ev:
	case <-ctx.Done():
	}
}
