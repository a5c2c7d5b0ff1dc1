package driver

import (
	"context"
	"time"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/health"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// Preview builds the slices an agent with options o would publish for the
// node as it is, through the agent's own publisher, with the health signals
// evs observed at once (what a backend's health watch would report first).
// It recovers no claims and starts nothing: the agent's --dry-run. Only
// NodeName, Backend, the publishing options and Health are read.
func Preview(ctx context.Context, o Options, evs []backend.HealthEvent) (*publish.Result, error) {
	o = o.withDefaults()
	tr := health.NewTracker(o.Health)
	for _, ev := range evs {
		tr.Observe(ev.UUID, ev)
	}
	tr.Expire(time.Now())
	p := newPublisher(&o, tr)
	// As on a node where the agent never ran: its window opens afresh.
	p.open = map[string]bool{}
	if err := p.publish(ctx, inventoryChanged); err != nil {
		return nil, err
	}
	return p.Published(), nil
}
