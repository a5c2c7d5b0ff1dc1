package amdsysfs

import (
	"fmt"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/publish"
)

const driverName = "gpu.tessera.dev"

func publishNode(t *testing.T, root, node string) ([]*resourceapi.ResourceSlice, *publish.Result) {
	t.Helper()
	res, err := publish.Build(node, discover(t, root), publish.Options{Partitioning: publish.Static})
	if err != nil {
		t.Fatal(err)
	}
	return publish.Objects(driverName, node, res.Resources), res
}

func TestPublishedSlices(t *testing.T) {
	tests := []struct {
		root          string
		devices       int
		first         string
		partitionMode bool
	}{
		{fixture("mi300x-8-spx"), 8, "gpu-0", false},
		{fixture("mi300x-8-cpx"), 64, "gpu-0-xcp-cpx-0", true},
		{fixture("mi250x-4"), 8, "gpu-0", false},
		{fixture("mi210-pcie"), 2, "gpu-0", false},
		{fixture("w7900"), 1, "gpu-0", false},
		// The real capture's partition 3 has 16 MiB less VRAM than the others,
		// and internal/publish puts smaller partitions first.
		{sharedMI308X, 32, "gpu-0-xcp-cpx-3", true},
	}
	for _, tc := range tests {
		t.Run(tc.root, func(t *testing.T) {
			objs, res := publishNode(t, tc.root, "n1")
			if len(res.Order) != tc.devices || res.Order[0] != tc.first {
				t.Fatalf("%d devices starting %v, want %d starting %s", len(res.Order), res.Order[:min(3, len(res.Order))], tc.devices, tc.first)
			}
			for _, s := range objs {
				for _, d := range s.Spec.Devices {
					a := d.Attributes
					if *a["vendor"].StringValue != "amd" || a["gfxVersion"].VersionValue == nil || a["fabric"].StringValue == nil {
						t.Errorf("%s: attributes %v", d.Name, a)
					}
					if isPart := *a["type"].StringValue == "partition"; isPart != tc.partitionMode {
						t.Errorf("%s: type %s", d.Name, *a["type"].StringValue)
					} else if isPart && (a["parentUUID"].StringValue == nil || *a["partitionKind"].StringValue != "xcp" || *a["profile"].StringValue != "CPX") {
						t.Errorf("%s: partition attributes %v", d.Name, a)
					}
				}
			}
		})
	}
}

func TestAllocation(t *testing.T) {
	const (
		memAtLeast = `device.capacity["gpu.tessera.dev"].memory.compareTo(quantity("%s")) >= 0`
		modelIs    = `device.attributes["gpu.tessera.dev"].model == "%s"`
	)
	req := func(class string, n int64, cel ...string) alloctest.Request {
		return alloctest.Request{Name: "r", Class: class, Count: n, CEL: cel}
	}
	type step struct {
		claim *resourceapi.ResourceClaim
		want  []string // nil: must not fit
	}
	tests := []struct {
		name, root string
		steps      []step
	}{
		{"4 MI300X partitions on one card", fixture("mi300x-8-cpx"), []step{
			{alloctest.MatchAttribute(alloctest.Claim("four", req("xcp.gpu.tessera.dev", 4, fmt.Sprintf(modelIs, "MI300X"))), "gpu.tessera.dev/parentUUID"),
				[]string{"gpu-0-xcp-cpx-0", "gpu-0-xcp-cpx-1", "gpu-0-xcp-cpx-2", "gpu-0-xcp-cpx-3"}},
			{alloctest.MatchAttribute(alloctest.Claim("five", req("xcp.gpu.tessera.dev", 5)), "gpu.tessera.dev/parentUUID"),
				[]string{"gpu-1-xcp-cpx-0", "gpu-1-xcp-cpx-1", "gpu-1-xcp-cpx-2", "gpu-1-xcp-cpx-3", "gpu-1-xcp-cpx-4"}},
			{alloctest.MatchAttribute(alloctest.Claim("nine", req("xcp.gpu.tessera.dev", 9)), "gpu.tessera.dev/parentUUID"), nil},
			{alloctest.Claim("whole", req("amd.gpu.tessera.dev", 1)), nil},
		}},
		{"4 MI308X partitions on one card (real capture)", sharedMI308X, []step{
			{alloctest.MatchAttribute(alloctest.Claim("four", req("xcp.gpu.tessera.dev", 4)), "gpu.tessera.dev/parentUUID"),
				[]string{"gpu-0-xcp-cpx-3", "gpu-0-xcp-cpx-0", "gpu-0-xcp-cpx-1", "gpu-0-xcp-cpx-2"}},
		}},
		{"two GPUs in one xGMI hive", fixture("mi250x-4"), []step{
			{alloctest.MatchAttribute(alloctest.Claim("pair", req("amd.gpu.tessera.dev", 2)), "gpu.tessera.dev/fabricIsland"), []string{"gpu-0", "gpu-1"}},
			{alloctest.MatchAttribute(alloctest.Claim("card", req("amd.gpu.tessera.dev", 2)), "gpu.tessera.dev/cardID"), []string{"gpu-2", "gpu-3"}},
		}},
		{"no xGMI pair on the PCIe MI210 node", fixture("mi210-pcie"), []step{
			{alloctest.MatchAttribute(alloctest.Claim("pair", req("amd.gpu.tessera.dev", 2)), "gpu.tessera.dev/fabricIsland"), nil},
			{alloctest.Claim("one", req("amd.gpu.tessera.dev", 1, fmt.Sprintf(modelIs, "MI210"))), []string{"gpu-0"}},
		}},
		{"any GPU with at least 128Gi", fixture("mi300x-8-spx"), []step{
			{alloctest.Claim("big", req("gpu.tessera.dev", 1, fmt.Sprintf(memAtLeast, "128Gi"))), []string{"gpu-0"}},
		}},
		{"no GPU with 128Gi on the W7900", fixture("w7900"), []step{
			{alloctest.Claim("big", req("gpu.tessera.dev", 1, fmt.Sprintf(memAtLeast, "128Gi"))), nil},
			{alloctest.Claim("small", req("gpu.tessera.dev", 1, fmt.Sprintf(memAtLeast, "40Gi"))), []string{"gpu-0"}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			classes, err := alloctest.Classes()
			if err != nil {
				t.Fatal(err)
			}
			objs, _ := publishNode(t, tc.root, "n1")
			c := alloctest.NewCluster(objs, classes)
			for _, s := range tc.steps {
				got, err := c.Allocate(ctx, "n1", s.claim)
				if err != nil {
					t.Fatalf("claim %s: %v", s.claim.Name, err)
				}
				if s.want == nil {
					if got != nil {
						t.Fatalf("claim %s must not fit, got %v", s.claim.Name, alloctest.Devices(got[0]))
					}
					continue
				}
				if got == nil {
					t.Fatalf("claim %s did not fit", s.claim.Name)
				}
				if names := alloctest.Devices(got[0]); !slices.Equal(names, s.want) {
					t.Errorf("claim %s got %v, want %v", s.claim.Name, names, s.want)
				}
			}
		})
	}
}

// TestSimMatchesBackend checks that the simulator's AMD machines publish
// what this backend publishes on the matching fixture: the same attribute
// names (plus the simulator's `simulated` mark, which hardware never
// carries) and the same model, architecture, gfxVersion, vendor, memory and
// computeUnits.
func TestSimMatchesBackend(t *testing.T) {
	tests := []struct{ profile, root, model string }{
		{"mi300x-8", fixture("mi300x-8-spx"), "MI300X"},
		{"mixed-inference", fixture("mi210-pcie"), "MI210"},
	}
	for _, tc := range tests {
		t.Run(tc.profile, func(t *testing.T) {
			simObjs, _ := alloctest.PublishSim(t, tc.profile, "n1")
			simDev := findModel(t, simObjs, tc.model)
			objs, _ := publishNode(t, tc.root, "n1")
			amdDev := findModel(t, objs, tc.model)
			names := func(d resourceapi.Device) []string {
				var out []string
				for k := range d.Attributes {
					out = append(out, string(k))
				}
				for k := range d.Capacity {
					out = append(out, "capacity:"+string(k))
				}
				slices.Sort(out)
				return out
			}
			if simDev.Attributes["simulated"].BoolValue == nil || amdDev.Attributes["simulated"].BoolValue != nil {
				t.Errorf("simulated mark: sim %v, amd %v", simDev.Attributes["simulated"], amdDev.Attributes["simulated"])
			}
			delete(simDev.Attributes, "simulated")
			if a, s := names(amdDev), names(simDev); !slices.Equal(a, s) {
				t.Errorf("attribute names differ:\n amd %v\n sim %v", a, s)
			}
			for _, k := range []resourceapi.QualifiedName{"model", "architecture", "vendor"} {
				if *amdDev.Attributes[k].StringValue != *simDev.Attributes[k].StringValue {
					t.Errorf("%s: amd %q, sim %q", k, *amdDev.Attributes[k].StringValue, *simDev.Attributes[k].StringValue)
				}
			}
			if *amdDev.Attributes["gfxVersion"].VersionValue != *simDev.Attributes["gfxVersion"].VersionValue {
				t.Errorf("gfxVersion: amd %s, sim %s", *amdDev.Attributes["gfxVersion"].VersionValue, *simDev.Attributes["gfxVersion"].VersionValue)
			}
			for _, k := range []resourceapi.QualifiedName{"memory", "computeUnits"} {
				a, s := amdDev.Capacity[k].Value, simDev.Capacity[k].Value
				if a.Cmp(s) != 0 {
					t.Errorf("%s: amd %s, sim %s", k, a.String(), s.String())
				}
			}
		})
	}
}

func findModel(t *testing.T, objs []*resourceapi.ResourceSlice, model string) resourceapi.Device {
	t.Helper()
	for _, s := range objs {
		for _, d := range s.Spec.Devices {
			if v := d.Attributes["model"].StringValue; v != nil && *v == model {
				return d
			}
		}
	}
	t.Fatalf("no %s device published", model)
	return resourceapi.Device{}
}
