package alloctest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/tessera-gpu/tessera/internal/alloctest"
)

// TestNVIDIALayout: the reference layout holds what an H100 holds, through
// the real allocator: each MIG table's instance count per GPU, never a
// whole GPU next to a partition.
func TestNVIDIALayout(t *testing.T) {
	_, inv := alloctest.DiscoverSim(t, "dgx-h100", "n")
	objs, err := alloctest.NVIDIALayout("n", inv)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 9 || len(objs[0].Spec.SharedCounters) != 8 || len(objs[1].Spec.Devices) != 26 {
		t.Fatalf("%d slices, want a counter slice and one per GPU with the GPU and its 25 placements", len(objs))
	}
	if got := objs[1].Spec.Devices[1].Name; got != "gpu-0-mig-1g10gb-19-0" {
		t.Errorf("second device %s, want gpu-0-mig-1g10gb-19-0 (name order)", got)
	}
	ctx := context.Background()
	fill := func(c *alloctest.Cluster, kind string) int {
		n := 0
		for ; ; n++ {
			req := alloctest.Request{Name: "r", Class: "mig.nvidia.com", CEL: []string{fmt.Sprintf(`device.attributes["gpu.nvidia.com"].profile == %q`, kind)}}
			if kind == "gpu" {
				req = alloctest.Request{Name: "r", Class: "gpu.nvidia.com"}
			}
			got, err := c.Allocate(ctx, "n", alloctest.Claim(fmt.Sprint(kind, n), req))
			if err != nil {
				t.Fatal(err)
			}
			if got == nil {
				return n
			}
		}
	}
	for kind, want := range map[string]int{"gpu": 8, "1g.10gb": 56, "1g.10gb+me": 8, "1g.20gb": 32, "2g.20gb": 24, "3g.40gb": 16, "7g.80gb": 8} {
		c := alloctest.NewCluster(objs, alloctest.NVIDIAClasses())
		if got := fill(c, kind); got != want {
			t.Errorf("%s: %d fit, want %d", kind, got, want)
		}
	}
	c := alloctest.NewCluster(objs, alloctest.NVIDIAClasses())
	if got := fill(c, "4g.40gb"); got != 8 {
		t.Errorf("4g.40gb: %d fit, want 8", got)
	}
	if got := fill(c, "gpu"); got != 0 {
		t.Errorf("%d whole GPUs fit next to a 4g.40gb on every GPU", got)
	}
	if got := fill(c, "3g.40gb"); got != 8 {
		t.Errorf("%d 3g.40gb fit next to a 4g.40gb on every GPU, want 8", got)
	}
}
