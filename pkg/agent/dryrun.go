package agent

import (
	"context"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"

	"github.com/tessera-gpu/tessera/pkg/backend"
	"github.com/tessera-gpu/tessera/pkg/driver"
	"github.com/tessera-gpu/tessera/pkg/slices"
)

// DryRun writes the node's ResourceSlices to w as a YAML stream, built by the
// same path the running agent publishes through.
func DryRun(ctx context.Context, nodeName string, b backend.Backend, opts slices.Options, w io.Writer) error {
	inv, err := b.Discover(ctx)
	if err != nil {
		return fmt.Errorf("discover devices with backend %s: %w", b.Name(), err)
	}
	res, err := slices.BuildWith(nodeName, inv, opts)
	if err != nil {
		return err
	}
	for _, s := range slices.Objects(driver.DriverName, nodeName, res.Resources) {
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
