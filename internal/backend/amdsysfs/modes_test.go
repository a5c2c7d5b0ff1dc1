package amdsysfs

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// TestModesDiscovered: every mode available_compute_partition lists is a
// profile, its partitions splitting the XCCs evenly, and the current
// compute and memory modes are recorded, in SPX and in CPX.
func TestModesDiscovered(t *testing.T) {
	// The modes are what available_compute_partition lists (all four in
	// both fixtures, NPS4 in the CPX one too), not a table of our own.
	for _, tt := range []struct{ fixture, mode, memory string }{{"mi300x-8-spx", "SPX", "NPS1"}, {"mi300x-8-cpx", "CPX", "NPS4"}} {
		t.Run(tt.fixture, func(t *testing.T) {
			g := discover(t, fixture(tt.fixture)).GPUs[0]
			pt := g.Partitioning
			if pt.Mode != tt.mode || pt.MemoryMode != tt.memory {
				t.Fatalf("mode %q memory %q, want %s %s", pt.Mode, pt.MemoryMode, tt.mode, tt.memory)
			}
			want := map[string]int{"SPX": 1, "DPX": 2, "QPX": 4, "CPX": 8}
			if len(pt.Profiles) != len(want) {
				t.Fatalf("profiles %+v, want SPX, DPX, QPX, CPX", pt.Profiles)
			}
			for _, pr := range pt.Profiles {
				n := want[pr.Name]
				if len(pr.Placements) != n || pr.ComputeSlices != 8/n {
					t.Errorf("%s: %d placements of %d XCCs, want %d of %d", pr.Name, len(pr.Placements), pr.ComputeSlices, n, 8/n)
				}
				for k, pl := range pr.Placements {
					if pl != (inventory.Placement{Start: k * 8 / n, Size: 8 / n}) {
						t.Errorf("%s placement %d at %+v", pr.Name, k, pl)
					}
				}
			}
		})
	}
}

// TestSwitchModeWrites: SwitchMode writes current_compute_partition, and
// refuses a mode the GPU does not offer, writing nothing.
func TestSwitchModeWrites(t *testing.T) {
	root := copyTree(t, fixture("mi300x-8-spx"))
	b, err := New(Options{SysfsRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n, err := b.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g := n.GPUs[0]
	file := filepath.Join(root, pciDevicesDir, g.PCIBusID, "current_compute_partition")
	if err := b.SwitchMode(ctx, g.UUID, "TPX"); err == nil || !strings.Contains(err.Error(), "mode TPX is not available under memory mode NPS1") {
		t.Errorf("TPX on an MI300X: %v", err)
	}
	if err := b.SwitchMode(ctx, g.UUID, "CPX"); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(file); err != nil || string(data) != "CPX\n" {
		t.Fatalf("current_compute_partition holds %q (%v)", data, err)
	}
}
