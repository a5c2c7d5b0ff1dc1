package publish

import (
	"slices"
	"testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

func TestKebab(t *testing.T) {
	for in, want := range map[string]string{"jpegDecoders": "jpeg-decoders", "ofa": "ofa", "1g.10gb+me": "1g-10gb-me", "copyEngines": "copy-engines", "1g_5gb": "1g-5gb"} {
		if got := kebab(in); got != want {
			t.Errorf("kebab(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCounterPlanKeepsOnlyBindingLimits: a limit becomes a counter exactly
// when some set of non-overlapping placements would exceed it.
func TestCounterPlanKeepsOnlyBindingLimits(t *testing.T) {
	one := func(name string, starts ...int) inventory.PartitionProfile {
		p := inventory.PartitionProfile{Name: name, MemorySlices: 1, ComputeSlices: 1, Engines: map[string]int64{}}
		for _, s := range starts {
			p.Placements = append(p.Placements, inventory.Placement{Start: s, Size: 1})
		}
		return p
	}
	tests := []struct {
		name    string
		compute int
		engines map[string]int64
		mod     func(*inventory.PartitionProfile)
		want    []string
	}{
		{name: "memory only: 4 slices, 4 compute", compute: 4, want: nil},
		{name: "compute binds: 4 slices, 3 compute", compute: 3, want: []string{"compute-slices"}},
		{name: "engine binds", compute: 4, engines: map[string]int64{"ofa": 1}, mod: func(p *inventory.PartitionProfile) { p.Engines["ofa"] = 1 }, want: []string{"ofa"}},
		{name: "instance cap binds", compute: 4, mod: func(p *inventory.PartitionProfile) { p.MaxInstances = 2 }, want: []string{"instances-1g-x"}},
		{name: "instance cap implied by an engine", compute: 4, engines: map[string]int64{"ofa": 1}, mod: func(p *inventory.PartitionProfile) { p.Engines["ofa"] = 1; p.MaxInstances = 1 }, want: []string{"ofa"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := one("1g.x", 0, 1, 2, 3)
			if tc.mod != nil {
				tc.mod(&p)
			}
			g := &inventory.GPU{UUID: "GPU-" + tc.name, Engines: tc.engines, Partitioning: &inventory.Partitioning{Kind: inventory.PartitionMIG, MemorySlices: 4, ComputeSlices: tc.compute, Profiles: []inventory.PartitionProfile{p}}}
			plan, err := newCounterPlan(g)
			if err != nil {
				t.Fatal(err)
			}
			var extras []string
			for _, x := range plan.extras {
				extras = append(extras, x.name)
			}
			if !slices.Equal(extras, tc.want) {
				t.Errorf("extra counters %v, want %v", extras, tc.want)
			}
			if len(plan.names) != 4+len(tc.want) {
				t.Errorf("counters %v", plan.names)
			}
		})
	}
}
