package agent

import (
	"context"
	"fmt"
	"io"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/tessera-gpu/tessera/pkg/backend"
	"github.com/tessera-gpu/tessera/pkg/driver"
	"github.com/tessera-gpu/tessera/pkg/health"
	"github.com/tessera-gpu/tessera/pkg/publish"
)

// healthSnapshotter is a backend that can say at once what its health
// watch would report first (the simulator's recorded faults).
type healthSnapshotter interface {
	HealthSnapshot() ([]backend.HealthEvent, error)
}

// DryRun writes the node's ResourceSlices to w as a YAML stream, built by the
// same path the running agent publishes through. Where the backend can say
// what its health watch would report first, the taints are those a running
// agent would publish.
func DryRun(ctx context.Context, nodeName string, b backend.Backend, opts publish.Options, policy health.Policy, w io.Writer) error {
	inv, err := b.Discover(ctx)
	if err != nil {
		return fmt.Errorf("discover devices with backend %s: %w", b.Name(), err)
	}
	if hs, ok := b.(healthSnapshotter); ok {
		evs, err := hs.HealthSnapshot()
		if err != nil {
			return fmt.Errorf("health of backend %s: %w", b.Name(), err)
		}
		tr := health.NewTracker(policy)
		for _, ev := range evs {
			tr.Observe(ev.UUID, ev)
		}
		tr.Expire(time.Now())
		opts.Taints = tr.Taints
	}
	res, err := publish.BuildWith(nodeName, inv, opts)
	if err != nil {
		return err
	}
	for _, s := range publish.Objects(driver.DriverName, nodeName, res.Resources) {
		out, err := yaml.Marshal(s)
		if err != nil {
			return fmt.Errorf("render slice: %w", err)
		}
		if _, err := fmt.Fprintf(w, "---\n%s", out); err != nil {
			return err
		}
	}
	return nil
}
