package publish_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/gpuvendor/vendors"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/isolation"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// TestMemoryIsolationSelectable: a claim can require how its share is
// held, and the real allocator honours it. On a node whose kernel offers
// every prerequisite but whose agent sets no kernel limit, a claim that
// requires kernel isolation fits nowhere (it stays pending rather than land
// on a GPU that would not hold it); process finds the NVIDIA GPUs, none
// the AMD one.
func TestMemoryIsolationSelectable(t *testing.T) {
	classes, err := alloctest.Classes()
	if err != nil {
		t.Fatal(err)
	}
	host := isolation.Host{Root: "/sys/fs/cgroup", CgroupV2: true, Dmem: true}
	opts := publish.Options{Partitioning: publish.Static, Sharing: publish.SharingCapacity,
		Isolation: func(g *inventory.GPU, p *inventory.Partition) isolation.Assessment {
			return isolation.Assess(vendors.Capabilities(g.Vendor), g, p, host)
		}}
	slices, res := alloctest.PublishSimWith(t, "mixed-inference", "mixed-inference", opts)
	for name, e := range res.Devices {
		want := "process"
		if e.GPU.Vendor == inventory.VendorAMD {
			want = "none"
		}
		for _, s := range slices {
			for _, d := range s.Spec.Devices {
				if d.Name == name {
					if got := d.Attributes["memoryIsolation"].StringValue; got == nil || *got != want {
						t.Errorf("device %s (%s): memoryIsolation %v, want %s", name, e.GPU.Vendor, got, want)
					}
				}
			}
		}
	}
	c := alloctest.NewCluster(slices, classes)
	isIsolation := `device.attributes["gpu.tessera.dev"].memoryIsolation == "%s"`
	for _, tc := range []struct {
		level  string
		vendor string // "" when nothing fits
	}{{"kernel", ""}, {"process", "nvidia"}, {"none", "amd"}} {
		claim := alloctest.Claim("iso-"+tc.level, req("gpu.tessera.dev", 1, fmt.Sprintf(isIsolation, tc.level)))
		got, err := c.Allocate(context.Background(), "mixed-inference", claim)
		if err != nil {
			t.Fatalf("memoryIsolation %s: %v", tc.level, err)
		}
		if tc.vendor == "" {
			if got != nil {
				t.Errorf("memoryIsolation %s: allocated %v, want no fit", tc.level, alloctest.Devices(got[0]))
			}
			continue
		}
		if got == nil {
			t.Fatalf("memoryIsolation %s: no fit, want a %s device", tc.level, tc.vendor)
		}
		dev := alloctest.Devices(got[0])[0]
		if v := res.Devices[dev].GPU.Vendor; string(v) != tc.vendor {
			t.Errorf("memoryIsolation %s: got %s of %s, want %s", tc.level, dev, v, tc.vendor)
		}
		c.Release(got[0])
	}
}

// TestMinShareIsolation: a node told to share only what holds at least
// process limits shares its NVIDIA GPUs and publishes the AMD one whole;
// told kernel, it shares nothing today.
func TestMinShareIsolation(t *testing.T) {
	host := isolation.Host{Root: "/sys/fs/cgroup", CgroupV2: true}
	level := func(g *inventory.GPU, p *inventory.Partition) isolation.Assessment {
		return isolation.Assess(vendors.Capabilities(g.Vendor), g, p, host)
	}
	for _, tc := range []struct {
		min         isolation.Level
		nvidia, amd bool // shared
	}{{"", true, true}, {isolation.None, true, true}, {isolation.Process, true, false}, {isolation.Kernel, false, false}} {
		_, res := alloctest.PublishSimWith(t, "mixed-inference", "mixed-inference", publish.Options{Partitioning: publish.Static,
			Sharing: publish.SharingCapacity, Isolation: level, MinShareIsolation: tc.min})
		for name, e := range res.Devices {
			want := tc.nvidia
			if e.GPU.Vendor == inventory.VendorAMD {
				want = tc.amd
			}
			if got := e.Shared != nil; got != want {
				t.Errorf("min %q: device %s (%s) shared %v, want %v", tc.min, name, e.GPU.Vendor, got, want)
			}
		}
	}
}

// TestLegacyMPSShares: where MPS holds shares, each device says whether its
// shares get MPS v3 namespaces of their own (mpsNamespace); a claim can
// require it, and --legacy-mps-shares=whole publishes legacy-MPS GPUs
// whole. The R580 L4 has legacy MPS, the R615 one v3.
func TestLegacyMPSShares(t *testing.T) {
	host := isolation.Host{Root: "/sys/fs/cgroup"}
	assess := func(g *inventory.GPU, p *inventory.Partition) isolation.Assessment {
		return isolation.Assess(vendors.Capabilities(g.Vendor), g, p, host)
	}
	for _, tc := range []struct {
		profile   string
		whole     bool
		namespace bool // the devices' mpsNamespace
		shared    bool
	}{
		{"l4-4", false, false, true}, {"l4-4", true, false, false},
		{"l4-4-r615", false, true, true}, {"l4-4-r615", true, true, true},
	} {
		slices, res := alloctest.PublishSimWith(t, tc.profile, tc.profile, publish.Options{Partitioning: publish.Static,
			Sharing: publish.SharingCapacity, Isolation: assess, WholeLegacyMPS: tc.whole})
		for name, e := range res.Devices {
			if got := e.Shared != nil; got != tc.shared {
				t.Errorf("%s, whole legacy %v: device %s shared %v, want %v", tc.profile, tc.whole, name, got, tc.shared)
			}
		}
		n := 0
		for _, s := range slices {
			for _, d := range s.Spec.Devices {
				a, ok := d.Attributes["mpsNamespace"]
				if !ok || a.BoolValue == nil || *a.BoolValue != tc.namespace {
					t.Errorf("%s: device %s mpsNamespace %+v, want %v", tc.profile, d.Name, a, tc.namespace)
				}
				n++
			}
		}
		if n == 0 {
			t.Fatalf("%s: no devices published", tc.profile)
		}
		if tc.whole {
			continue
		}
		// A claim that needs its own namespace fits only the R615 node.
		classes, err := alloctest.Classes()
		if err != nil {
			t.Fatal(err)
		}
		c := alloctest.NewCluster(slices, classes)
		got, err := c.Allocate(context.Background(), tc.profile, alloctest.Claim("ns", req("gpu.tessera.dev", 1, `device.attributes["gpu.tessera.dev"].mpsNamespace`)))
		if err != nil {
			t.Fatal(err)
		}
		if (got != nil) != tc.namespace {
			t.Errorf("%s: a claim requiring mpsNamespace allocated %v, want a fit %v", tc.profile, got != nil, tc.namespace)
		}
	}
}
