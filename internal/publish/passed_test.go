package publish_test

import (
	"context"
	"slices"
	"testing"

	"k8s.io/dynamic-resource-allocation/deviceattribute"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// without is inv as a backend lists it once the GPU with uuid left its host
// driver: without it.
func without(inv *inventory.Node, uuid string) *inventory.Node {
	out := inv.Clone()
	out.GPUs = slices.DeleteFunc(out.GPUs, func(g inventory.GPU) bool { return g.UUID == uuid })
	return out
}

// TestPassedGPUWithheldKeepsNames: a GPU passed through publishes no
// device, static or dynamic, while every other GPU keeps its name and
// UUID, whether the backend still lists the passed GPU or not, and
// whether the agent saw it before or knows it only from the checkpoint.
// The real allocator then finds seven H100s, not eight.
func TestPassedGPUWithheldKeepsNames(t *testing.T) {
	_, inv := alloctest.DiscoverSim(t, "dgx-h100", "node-1")
	before, err := publish.Build("node-1", inv, publish.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g3 := *before.Devices["gpu-3"].GPU
	classes, err := alloctest.Classes()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		inv    *inventory.Node
		passed publish.PassedGPU
		opts   publish.Options
	}{
		{"static, unlisted, seen before", without(inv, g3.UUID), publish.PassedGPU{UUID: g3.UUID, PCIBusID: g3.PCIBusID, Vendor: g3.Vendor, Seen: &g3}, publish.Options{}},
		{"static, unlisted, known from the checkpoint", without(inv, g3.UUID), publish.PassedGPU{UUID: g3.UUID, PCIBusID: "00000000:" + g3.PCIBusID[5:], Vendor: g3.Vendor}, publish.Options{}},
		{"static, still listed", inv, publish.PassedGPU{UUID: g3.UUID, PCIBusID: g3.PCIBusID}, publish.Options{}},
		{"dynamic, unlisted", without(inv, g3.UUID), publish.PassedGPU{UUID: g3.UUID, PCIBusID: g3.PCIBusID, Vendor: g3.Vendor}, publish.Options{Partitioning: publish.Dynamic}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want, err := publish.Build("node-1", inv, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			tc.opts.Passed = []publish.PassedGPU{tc.passed}
			res, err := publish.Build("node-1", tc.inv, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			for name, e := range want.Devices {
				parent, _ := names.ParentGPU(name)
				got, ok := res.Devices[name]
				switch {
				case parent == "gpu-3" && ok:
					t.Errorf("device %s of the passed GPU is published", name)
				case parent != "gpu-3" && (!ok || got.GPU.UUID != e.GPU.UUID):
					t.Errorf("device %s: published %v, GPU %v; want GPU %s", name, ok, got.GPU, e.GPU.UUID)
				}
			}
			p, ok := res.Passed["gpu-3"]
			if !ok || p.GPU.UUID != g3.UUID {
				t.Fatalf("Passed = %+v, want gpu-3 with UUID %s", res.Passed, g3.UUID)
			}
			if bdf := p.Attributes[deviceattribute.StandardDeviceAttributePCIBusID]; bdf.StringValue == nil || *bdf.StringValue != g3.PCIBusID {
				t.Errorf("the passed GPU's attributes name bus ID %v, want %s", bdf.StringValue, g3.PCIBusID)
			}
			objs := publish.Objects(names.DriverName, "node-1", res.Resources)
			c := alloctest.NewCluster(objs, classes)
			eight := alloctest.Claim("eight", alloctest.Request{Name: "gpu", Class: "gpu.tessera.dev", Count: 8})
			if r, err := c.Allocate(context.Background(), "node-1", eight); err != nil || r != nil {
				t.Errorf("eight GPUs allocated with one passed: %v, %v", r, err)
			}
			seven := alloctest.Claim("seven", alloctest.Request{Name: "gpu", Class: "gpu.tessera.dev", Count: 7})
			if r, err := c.Allocate(context.Background(), "node-1", seven); err != nil || r == nil {
				t.Errorf("seven GPUs: %v, %v; want them", r, err)
			} else if devs := alloctest.Devices(r[0]); len(devs) != 7 || slices.Contains(devs, "gpu-3") {
				t.Errorf("seven GPUs: %v, want every GPU but gpu-3", devs)
			}
		})
	}
}

// TestIOMMUGroupAttribute: the vfio class selects GPUs by iommuGroup,
// which only a GPU published whole and unshared that can be passed
// carries; the real allocator then picks only those.
func TestIOMMUGroupAttribute(t *testing.T) {
	_, inv := alloctest.DiscoverSim(t, "l4-4", "node-1")
	passable := map[string]int{inv.GPUs[1].PCIBusID: 7, inv.GPUs[2].PCIBusID: 8}
	group := func(g *inventory.GPU) (int, bool) { n, ok := passable[g.PCIBusID]; return n, ok }
	classes, err := alloctest.Classes()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sharing publish.Sharing
		want    int
	}{{publish.SharingNone, 2}, {publish.SharingCapacity, 0}} {
		res, err := publish.Build("node-1", inv, publish.Options{IOMMUGroup: group, Sharing: tc.sharing})
		if err != nil {
			t.Fatal(err)
		}
		c := alloctest.NewCluster(publish.Objects(names.DriverName, "node-1", res.Resources), classes)
		var got []string
		for range 3 {
			r, err := c.Allocate(context.Background(), "node-1", alloctest.Claim("vm", alloctest.Request{Name: "gpu", Class: names.VFIOClass}))
			if err != nil {
				t.Fatal(err)
			}
			if r == nil {
				break
			}
			d := alloctest.Devices(r[0])[0]
			if _, ok := res.Devices[d].Attributes[publish.AttrIOMMUGroup]; !ok {
				t.Errorf("sharing %q: the vfio class took %s, which has no iommuGroup", tc.sharing, d)
			}
			got = append(got, d)
		}
		if len(got) != tc.want {
			t.Errorf("sharing %q: the vfio class got %v, want %d GPUs", tc.sharing, got, tc.want)
		}
	}
}
