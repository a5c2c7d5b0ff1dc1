package publish_test

import (
	"fmt"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// TestDynamicWithholdsPartitionsNobodyHolds: a partition no claim holds (an
// orphan that would not go, one cut by hand) takes its counters out of the
// GPU's set, so the real allocator stops offering what the hardware would
// refuse: its slices, the engine it holds, and the whole GPU.
func TestDynamicWithholdsPartitionsNobodyHolds(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	hw := migBackend(t, ctx, "dgx-h100")
	inv, err := hw.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first, err := publish.Build("dgx-h100", inv, dynamic)
	if err != nil {
		t.Fatal(err)
	}
	victim := first.Devices["gpu-7"].GPU.UUID
	held, err := hw.CreatePartition(ctx, victim, "1g.10gb", inventory.Placement{Start: 0, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	stuck, err := hw.CreatePartition(ctx, victim, "1g.10gb+me", inventory.Placement{Start: 3, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	if inv, err = hw.Discover(ctx); err != nil {
		t.Fatal(err)
	}
	classes, err := alloctest.Classes()
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name         string
		held         func(string, *inventory.Partition) bool
		withheld     []string
		zero         int // counters of gpu-7 at 0
		max1g, maxMe int // allocatable 1g.10gb / 1g.10gb+me claims on the node
	}{
		// Nil: every partition is taken to be held, counters are whole
		// (held partitions' claims consume them in the cluster). The
		// 1g.10gb at slice 3, which the stuck partition covers, is left
		// out: this test's allocator, unlike the cluster's, does not see
		// the partitions' claims, and would hand it out.
		{name: "nil", zero: 0, max1g: 55, maxMe: 8},
		{name: "claim holds one", held: func(_ string, p *inventory.Partition) bool { return p.UUID == held.UUID },
			withheld: []string{stuck.UUID}, zero: 2, max1g: 55, maxMe: 7},
		{name: "nobody holds either", held: func(string, *inventory.Partition) bool { return false },
			withheld: []string{held.UUID, stuck.UUID}, zero: 3, max1g: 54, maxMe: 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := publish.Build("dgx-h100", inv, publish.Options{Partitioning: publish.Dynamic, Held: tc.held})
			if err != nil {
				t.Fatal(err)
			}
			var mode publish.GPUMode
			for _, m := range res.Modes {
				if m.UUID == victim {
					mode = m
				} else if len(m.Withheld) > 0 {
					t.Errorf("%s withholds %v", m.Device, m.Withheld)
				}
			}
			if fmt.Sprint(mode.Withheld) != fmt.Sprint(tc.withheld) {
				t.Errorf("gpu-7 withholds %v, want %v", mode.Withheld, tc.withheld)
			}
			set := counterSet(t, res, "gpu-7")
			var zero []string
			for name, c := range set.Counters {
				if c.Value.Value() == 0 {
					zero = append(zero, name)
				}
			}
			if len(zero) != tc.zero {
				t.Errorf("counters at 0: %v, want %d", zero, tc.zero)
			}
			for _, z := range zero {
				if tc.withheld != nil && z != "memory-slice-3" && z != "memory-slice-0" && strings.HasPrefix(z, "memory-slice") {
					t.Errorf("counter %s withheld; only slices 0 and 3 are taken", z)
				}
			}

			objs := publish.Objects(names.DriverName, "dgx-h100", res.Resources)
			c := alloctest.NewCluster(objs, classes)
			if got, _ := c.Allocate(ctx, "dgx-h100", alloctest.Claim("eight", req("nvidia.gpu.tessera.dev", 8))); (got != nil) != (tc.held == nil) {
				t.Errorf("8 whole GPUs allocated: %v, want %v (gpu-7 holds partitions)", got != nil, tc.held == nil)
			}
			c = alloctest.NewCluster(objs, classes)
			if n := fill(t, c, "1g.10gb"); n != tc.max1g {
				t.Errorf("%d 1g.10gb allocated, want %d", n, tc.max1g)
			}
			c = alloctest.NewCluster(objs, classes)
			if n := fill(t, c, "1g.10gb+me"); n != tc.maxMe {
				t.Errorf("%d 1g.10gb+me allocated, want %d (the stuck one holds gpu-7's OFA)", n, tc.maxMe)
			}
		})
	}
}

// fill allocates claims for profile until the allocator refuses, and counts.
func fill(t *testing.T, c *alloctest.Cluster, profile string) int {
	_, ctx := ktesting.NewTestContext(t)
	for n := 0; n < 100; n++ {
		got, err := c.Allocate(ctx, "dgx-h100", migClaim(fmt.Sprint("c", n), profile))
		if err != nil {
			t.Fatal(err)
		}
		if got == nil {
			return n
		}
	}
	t.Fatal("no end")
	return 0
}

func counterSet(t *testing.T, res *publish.Result, name string) resourceapi.CounterSet {
	for _, s := range res.Resources.Pools["dgx-h100"].Slices {
		for _, cs := range s.SharedCounters {
			if cs.Name == name {
				return cs
			}
		}
	}
	t.Fatalf("no counter set %s", name)
	return resourceapi.CounterSet{}
}
