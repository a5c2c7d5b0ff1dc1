package publish_test

import (
	"testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
)

// TestMemorySlicesUnusable: a dynamic H100's free memory slices, and those
// no published profile can use now, for the partitions that exist (NVIDIA's
// H100 80GB placements: 8 memory slices, 7 compute slices).
func TestMemorySlicesUnusable(t *testing.T) {
	mig := func(profile string, start, size int) inventory.Partition {
		return inventory.Partition{Kind: inventory.PartitionMIG, Profile: profile, Placement: inventory.Placement{Start: start, Size: size}, UUID: "MIG-" + profile}
	}
	sevenSmall := make([]inventory.Partition, 7)
	for i := range sevenSmall {
		sevenSmall[i] = mig("1g.10gb", i, 1)
	}
	for _, tc := range []struct {
		name     string
		parts    []inventory.Partition
		profiles []string
		want     publish.MemorySlices
	}{
		{"nothing carved: the whole GPU", nil, nil, publish.MemorySlices{Total: 8, Free: 8}},
		{"nothing carved, one profile published: the whole GPU still", nil, []string{"1g.10gb"}, publish.MemorySlices{Total: 8, Free: 8}},
		{"a 1g.10gb at 0: 1g.20gb at 6 and 3g.40gb at 4 use slice 7", []inventory.Partition{mig("1g.10gb", 0, 1)}, nil, publish.MemorySlices{Total: 8, Free: 7}},
		{"a 1g.10gb at 0, only 1g.10gb published: nothing uses slice 7", []inventory.Partition{mig("1g.10gb", 0, 1)}, []string{"1g.10gb"},
			publish.MemorySlices{Total: 8, Free: 7, Unusable: 1}},
		{"seven 1g.10gb: no compute slice is left for slice 7", sevenSmall, nil, publish.MemorySlices{Total: 8, Free: 1, Unusable: 1}},
		{"3g.40gb at 4 and 1g.10gb at 0: slices 1 to 3 take 1g and 2g", []inventory.Partition{mig("3g.40gb", 4, 4), mig("1g.10gb", 0, 1)}, nil,
			publish.MemorySlices{Total: 8, Free: 3}},
		{"4g.40gb at 0 and 3g.40gb at 4: nothing free", []inventory.Partition{mig("4g.40gb", 0, 4), mig("3g.40gb", 4, 4)}, nil, publish.MemorySlices{Total: 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := sim.Profile("dgx-h100", "n")
			if err != nil {
				t.Fatal(err)
			}
			inv := m.Node.Clone()
			g := &inv.GPUs[0]
			g.Partitioning.Enabled = len(tc.parts) > 0
			g.Partitions = append(g.Partitions, tc.parts...)
			res, err := publish.Build("n", inv, publish.Options{Partitioning: publish.Dynamic, Profiles: tc.profiles})
			if err != nil {
				t.Fatal(err)
			}
			name := ""
			for _, md := range res.Modes {
				if md.UUID == g.UUID {
					name = md.Device
				}
			}
			if got := res.Slices[name]; got != tc.want {
				t.Errorf("%s: %+v, want %+v", name, got, tc.want)
			}
			if len(res.Slices) != len(inv.GPUs) {
				t.Errorf("slices of %d GPUs, want all %d", len(res.Slices), len(inv.GPUs))
			}
		})
	}
	// A GPU not dynamic has none.
	res, _ := alloctestStatic(t)
	if len(res.Slices) != 0 {
		t.Errorf("static partitioning: slices %v", res.Slices)
	}
}

func alloctestStatic(t *testing.T) (*publish.Result, error) {
	m, err := sim.Profile("dgx-h100", "n")
	if err != nil {
		t.Fatal(err)
	}
	return publish.Build("n", m.Node.Clone(), publish.Options{})
}
