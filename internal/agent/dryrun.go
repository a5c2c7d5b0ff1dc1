package agent

import (
	"context"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/driver"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// healthSnapshotter is a backend that can say at once what its health
// watch would report first (the simulator's recorded faults).
type healthSnapshotter interface {
	HealthSnapshot() ([]backend.HealthEvent, error)
}

// DryRun writes the node's ResourceSlices to w as a YAML stream, built by the
// publisher the running agent publishes through (driver.Preview), from the
// options o the flags select. Where the backend can say what its health
// watch would report first, the taints are those a running agent would
// publish.
func DryRun(ctx context.Context, o driver.Options, w io.Writer) error {
	var evs []backend.HealthEvent
	if hs, ok := o.Backend.(healthSnapshotter); ok {
		var err error
		if evs, err = hs.HealthSnapshot(); err != nil {
			return fmt.Errorf("health of backend %s: %w", o.Backend.Name(), err)
		}
	}
	res, err := driver.Preview(ctx, o, evs)
	if err != nil {
		return err
	}
	for _, s := range publish.Objects(names.DriverName, o.NodeName, res.Resources) {
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
