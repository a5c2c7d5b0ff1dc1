package driver

import (
	"path/filepath"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
)

// TestPreviewIsWhatTheAgentPublishes: for the same node and health, the dry
// run (Preview) and a running agent's New build the same slices, on every
// catalogue machine and mode.
func TestPreviewIsWhatTheAgentPublishes(t *testing.T) {
	for _, profile := range sim.CatalogNames() {
		for _, pt := range []publish.Partitioning{publish.Static, publish.Dynamic} {
			for _, sh := range []publish.Sharing{publish.SharingNone, publish.SharingCapacity} {
				t.Run(profile+"/"+string(pt)+"/"+string(sh), func(t *testing.T) {
					ctx := testContext(t)
					dir := t.TempDir()
					b := newSim(t, profile)
					o := Options{
						NodeName: "node-1", Backend: b, PluginDataDir: filepath.Join(dir, "plugin"), CDIDir: filepath.Join(dir, "cdi"),
						BootID: "boot", Partitioning: pt, Sharing: sh,
					}
					d, err := New(ctx, o)
					if err != nil {
						t.Fatal(err)
					}
					defer d.Stop()
					// The same signal, seen by the agent's tracker and
					// by the preview's.
					inv, err := b.Discover(ctx)
					if err != nil {
						t.Fatal(err)
					}
					ev := healthEvent(inv.GPUs[0].UUID)
					d.tracker.Observe(ev.UUID, ev)
					if err := d.pub.publish(ctx, taintsChanged); err != nil {
						t.Fatal(err)
					}
					// After New: its recovery destroyed the orphans of a
					// dynamic node, and the preview reads the node as it is.
					got, err := Preview(ctx, o, []backend.HealthEvent{ev})
					if err != nil {
						t.Fatal(err)
					}
					want := d.Published()
					if !apiequality.Semantic.DeepEqual(got.Resources, want.Resources) {
						t.Errorf("the preview's slices differ from the agent's")
					}
					if !apiequality.Semantic.DeepEqual(got.Modes, want.Modes) {
						t.Errorf("preview modes %+v, agent %+v", got.Modes, want.Modes)
					}
					if !anyTainted(want.Resources) {
						t.Errorf("no device carries the injected taint")
					}
				})
			}
		}
	}
}

// anyTainted reports whether any device of r has a taint.
func anyTainted(r resourceslice.DriverResources) bool {
	for _, pool := range r.Pools {
		for _, sl := range pool.Slices {
			for _, d := range sl.Devices {
				if len(d.Taints) > 0 {
					return true
				}
			}
		}
	}
	return false
}
