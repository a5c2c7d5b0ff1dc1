package publish_test

import (
	"context"
	"testing"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// TestLayoutPairsEnds: on a DGX H100, empty or with partitions, windowed or
// not, slice k holds the k-th whole GPU in rule 2's order, then the
// placements of one GPU, the k-th from the other end; each GPU's
// placements are in one slice. So a whole-GPU claim meets a whole GPU
// first and a 1g.10gb claim a 1g.10gb second (on an empty node), and a
// carve rewrites one slice.
func TestLayoutPairsEnds(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		opts   publish.Options
		carved int // 1g.10gb partitions carved first, as first fit takes them
	}{
		{"every placement, empty", dynamic, 0},
		{"window of 2, empty", windowed(none, nil), 0},
		{"every placement, 9 partitions", dynamic, 9},
		{"window of 2, 9 partitions", windowed(nil, nil), 9},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hw, inv := alloctest.DiscoverSim(t, "dgx-h100", "n")
			for i := range inv.GPUs {
				inv.GPUs[i].Partitions = nil
			}
			for range tt.carved {
				res, err := publish.Build("n", inv, tt.opts)
				if err != nil {
					t.Fatal(err)
				}
				e := firstOfProfile(t, res, "1g.10gb")
				if err := hw.SetPartitionMode(ctx, e.GPU.UUID, true); err != nil {
					t.Fatal(err)
				}
				if _, err := hw.CreatePartition(ctx, e.GPU.UUID, e.Carve.Profile, e.Carve.Placement); err != nil {
					t.Fatal(err)
				}
				if inv, err = hw.Discover(ctx); err != nil {
					t.Fatal(err)
				}
			}
			res, err := publish.Build("n", inv, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			rank := map[string]int{} // GPU UUID -> rule 2's rank
			for _, g := range res.Window {
				rank[g.UUID] = g.Rank
			}
			slices := res.Resources.Pools["n"].Slices
			seen := map[string]int{} // GPU UUID -> the slice of its placements
			for k, s := range slices[:8] {
				if len(s.Devices) == 0 {
					t.Fatalf("slice %d is empty", k)
				}
				whole := res.Devices[s.Devices[0].Name]
				if whole.Carve != nil || rank[whole.GPU.UUID] != k {
					t.Errorf("slice %d starts with %s, want the whole GPU of rank %d", k, s.Devices[0].Name, k)
				}
				for _, d := range s.Devices[1:] {
					e := res.Devices[d.Name]
					if e.Carve == nil || rank[e.GPU.UUID] != 7-k {
						t.Errorf("slice %d holds %s, want placements of the GPU of rank %d", k, d.Name, 7-k)
					}
					if j, ok := seen[e.GPU.UUID]; ok && j != k {
						t.Errorf("%s in slice %d, its GPU's other placements in %d", d.Name, k, j)
					}
					seen[e.GPU.UUID] = k
				}
			}
			if tt.carved == 0 {
				if e := res.Devices[res.Order[1]]; e.Carve == nil || e.Carve.Profile != "1g.10gb" {
					t.Errorf("second device %s, want a 1g.10gb placement", res.Order[1])
				}
			}
		})
	}
}

// firstOfProfile is the first published placement of profile in scan order.
func firstOfProfile(t *testing.T, res *publish.Result, profile string) publish.Entry {
	t.Helper()
	for _, n := range res.Order {
		if e := res.Devices[n]; e.Carve != nil && e.Carve.Profile == profile && e.Partition == nil {
			return e
		}
	}
	t.Fatalf("no free %s placement", profile)
	return publish.Entry{}
}
