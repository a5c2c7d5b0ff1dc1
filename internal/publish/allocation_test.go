package publish_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
)

const driver = "gpu.tessera.dev"

// publish builds the slices of a catalogue machine exactly as the agent does.
func publishNode(t testing.TB, profile, node string) ([]*resourceapi.ResourceSlice, *publish.Result) {
	return alloctest.PublishSim(t, profile, node)
}

// cluster is the machines published as the agent does by default, each as
// a node named after its profile.
func cluster(t testing.TB, profiles ...string) *alloctest.Cluster {
	t.Helper()
	return sharedCluster(t, publish.SharingNone, publish.Static, profiles...)
}

// Selectors a user would write, against the vendor-neutral schema.
const (
	modelIs    = `device.attributes["gpu.tessera.dev"].model == "%s"`
	memAtLeast = `device.capacity["gpu.tessera.dev"].memory.compareTo(quantity("%s")) >= 0`
	// cudaComputeCapability exists only on NVIDIA devices: on a mixed node
	// the selector must check the vendor first (CEL's && short-circuits).
	ccAtLeast    = `device.attributes["gpu.tessera.dev"].vendor == "nvidia" && device.attributes["gpu.tessera.dev"].cudaComputeCapability.compareTo(semver("%s")) >= 0`
	profileIs    = `device.attributes["gpu.tessera.dev"].profile == "%s"`
	fabricIsland = "gpu.tessera.dev/fabricIsland"
	pcieRoot     = "resource.kubernetes.io/pcieRoot"
	numaNode     = "resource.kubernetes.io/numaNode"
)

func req(class string, count int64, cel ...string) alloctest.Request {
	return alloctest.Request{Name: "gpus", Class: class, Count: count, CEL: cel}
}

func TestAllocation(t *testing.T) {
	type step struct {
		claim *resourceapi.ResourceClaim
		// want is the allocated devices in order; nil means "must not fit".
		want []string
		// wantModels checks models instead of names when set.
		wantModels []string
	}
	tests := []struct {
		name    string
		profile string
		steps   []step
	}{
		{"by model: an H100", "dgx-h100", []step{
			{claim: alloctest.Claim("h100", req("gpu.tessera.dev", 1, fmt.Sprintf(modelIs, "H100"))), want: []string{"gpu-0"}},
			{claim: alloctest.Claim("mi300x", req("gpu.tessera.dev", 1, fmt.Sprintf(modelIs, "MI300X")))},
		}},
		{"by vendor: AMD class on a mixed node", "mixed-inference", []step{
			{claim: alloctest.Claim("amd", req("amd.gpu.tessera.dev", 1)), wantModels: []string{"MI210"}},
			{claim: alloctest.Claim("amd2", req("amd.gpu.tessera.dev", 1))},
		}},
		{"legacy nvidia.com/gpu: 2 takes the two smallest NVIDIA GPUs", "mixed-inference", []step{
			{claim: alloctest.Claim("legacy", req("nvidia.gpu.tessera.dev", 2)), wantModels: []string{"T4", "T4"}},
			{claim: alloctest.Claim("legacy2", req("nvidia.gpu.tessera.dev", 2)), wantModels: []string{"A100", "A100"}},
			{claim: alloctest.Claim("legacy3", req("nvidia.gpu.tessera.dev", 1))},
		}},
		{"memory >= 40Gi, any vendor, smallest adequate first", "mixed-inference", []step{
			{claim: alloctest.Claim("big", req("gpu.tessera.dev", 1, fmt.Sprintf(memAtLeast, "40Gi"))), wantModels: []string{"MI210"}},
			{claim: alloctest.Claim("big2", req("gpu.tessera.dev", 1, fmt.Sprintf(memAtLeast, "40Gi"))), wantModels: []string{"A100"}},
			{claim: alloctest.Claim("huge", req("gpu.tessera.dev", 1, fmt.Sprintf(memAtLeast, "100Gi")))},
		}},
		{"memory >= 128Gi finds MI300X", "mi300x-8", []step{
			{claim: alloctest.Claim("huge", req("gpu.tessera.dev", 1, fmt.Sprintf(memAtLeast, "128Gi"))), wantModels: []string{"MI300X"}},
		}},
		{"compute capability >= 8.0 skips the T4s", "mixed-inference", []step{
			{claim: alloctest.Claim("ampere", req("gpu.tessera.dev", 1, fmt.Sprintf(ccAtLeast, "8.0.0"))), wantModels: []string{"A100"}},
			{claim: alloctest.Claim("hopper", req("gpu.tessera.dev", 1, fmt.Sprintf(ccAtLeast, "9.0.0")))},
		}},
		{"two GPUs on one NVLink island never straddle bridges", "a100-pcie-pairs", []step{
			{claim: alloctest.Claim("one", req("gpu.tessera.dev", 1)), want: []string{"gpu-0"}},
			{claim: alloctest.MatchAttribute(alloctest.Claim("pair", req("gpu.tessera.dev", 2)), fabricIsland), want: []string{"gpu-2", "gpu-3"}},
			{claim: alloctest.MatchAttribute(alloctest.Claim("pair2", req("gpu.tessera.dev", 2)), fabricIsland)},
		}},
		{"eight GPUs on one NVSwitch island", "dgx-h100", []step{
			{claim: alloctest.MatchAttribute(alloctest.Claim("all", req("gpu.tessera.dev", 8)), fabricIsland), want: []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7"}},
		}},
		{"xGMI island of four", "mi300x-8", []step{
			{claim: alloctest.MatchAttribute(alloctest.Claim("four", req("amd.gpu.tessera.dev", 4)), fabricIsland), want: []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"}},
		}},
		{"GPUs on one PCIe root", "l4-4", []step{
			{claim: alloctest.MatchAttribute(alloctest.Claim("root", req("gpu.tessera.dev", 2)), pcieRoot), want: []string{"gpu-0", "gpu-1"}},
			{claim: alloctest.MatchAttribute(alloctest.Claim("root3", req("gpu.tessera.dev", 3)), pcieRoot)},
			{claim: alloctest.MatchAttribute(alloctest.Claim("root2", req("gpu.tessera.dev", 2)), pcieRoot), want: []string{"gpu-2", "gpu-3"}},
		}},
		{"distinct NUMA nodes", "dgx-h100", []step{
			{claim: alloctest.DistinctAttribute(alloctest.Claim("spread", req("gpu.tessera.dev", 2)), numaNode), want: []string{"gpu-0", "gpu-4"}},
			{claim: alloctest.DistinctAttribute(alloctest.Claim("spread3", req("gpu.tessera.dev", 3)), numaNode)},
		}},
		{"prefer H100, else A100, else MI300X: A100 node", "dgx-a100", []step{
			{claim: preferred(), wantModels: []string{"A100"}},
		}},
		{"prefer H100, else A100, else MI300X: MI300X node", "mi300x-8", []step{
			{claim: preferred(), wantModels: []string{"MI300X"}},
		}},
		{"prefer H100, else A100, else MI300X: H100 node", "hgx-h200", []step{
			{claim: preferred()},
		}},
		{"a 1g.10gb MIG slice", "dgx-h100-mig", []step{
			{claim: alloctest.Claim("slice", req("mig.gpu.tessera.dev", 1, fmt.Sprintf(profileIs, "1g.10gb"))), want: []string{"gpu-6-mig-1g-10gb-0"}},
			{claim: alloctest.Claim("half", req("mig.gpu.tessera.dev", 1, fmt.Sprintf(profileIs, "3g.40gb"))), want: []string{"gpu-7-mig-3g-40gb-4"}},
			{claim: alloctest.Claim("half2", req("mig.gpu.tessera.dev", 1, fmt.Sprintf(profileIs, "3g.40gb")))},
			// MIG-mode GPUs are not offered whole.
			{claim: alloctest.Claim("whole", req("gpu.tessera.dev", 7))},
			{claim: alloctest.Claim("whole6", req("gpu.tessera.dev", 6)), want: []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5"}},
		}},
		{"no MIG slices where MIG is off", "dgx-h100", []step{
			{claim: alloctest.Claim("slice", req("mig.gpu.tessera.dev", 1))},
		}},
		{"more GPUs than the node has", "t4-2", []step{
			{claim: alloctest.Claim("three", req("gpu.tessera.dev", 3))},
			{claim: alloctest.Claim("two", req("gpu.tessera.dev", 2)), want: []string{"gpu-0", "gpu-1"}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			c := cluster(t, tc.profile)
			_, res := publishNode(t, tc.profile, tc.profile)
			for _, s := range tc.steps {
				got, err := c.Allocate(ctx, tc.profile, s.claim)
				if err != nil {
					t.Fatalf("claim %s: %v", s.claim.Name, err)
				}
				if s.want == nil && s.wantModels == nil {
					if got != nil {
						t.Fatalf("claim %s must not fit, got %v", s.claim.Name, alloctest.Devices(got[0]))
					}
					continue
				}
				if got == nil {
					t.Fatalf("claim %s did not fit", s.claim.Name)
				}
				names := alloctest.Devices(got[0])
				if s.want != nil && !slices.Equal(names, s.want) {
					t.Errorf("claim %s got %v, want %v", s.claim.Name, names, s.want)
				}
				if s.wantModels != nil {
					var models []string
					for _, n := range names {
						models = append(models, res.Devices[n].GPU.Model)
					}
					if !slices.Equal(models, s.wantModels) {
						t.Errorf("claim %s got %v (%v), want models %v", s.claim.Name, names, models, s.wantModels)
					}
				}
			}
		})
	}
}

func preferred() *resourceapi.ResourceClaim {
	alt := func(name, model string) alloctest.Request {
		return alloctest.Request{Name: name, Class: "gpu.tessera.dev", Count: 1, CEL: []string{fmt.Sprintf(modelIs, model)}}
	}
	return alloctest.FirstAvailable("preferred", alt("h100", "H100"), alt("a100", "A100"), alt("mi300x", "MI300X"))
}

// TestFirstAvailablePicksSubrequest checks which alternative the allocator used.
func TestFirstAvailablePicksSubrequest(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	for profile, want := range map[string]string{"dgx-h100": "gpu/h100", "dgx-a100": "gpu/a100", "mi300x-8": "gpu/mi300x"} {
		c := cluster(t, profile)
		got, err := c.Allocate(ctx, profile, preferred())
		if err != nil || got == nil {
			t.Fatalf("%s: %v %v", profile, got, err)
		}
		if r := got[0].Devices.Results[0].Request; r != want {
			t.Errorf("%s: request %q, want %q", profile, r, want)
		}
	}
}

// TestEveryMachineFitsExactly: every catalogue machine offers all its GPUs
// to one claim, and not one more.
func TestEveryMachineFitsExactly(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	for _, profile := range sim.CatalogNames() {
		t.Run(profile, func(t *testing.T) {
			_, res := publishNode(t, profile, profile)
			var whole int64
			for _, e := range res.Devices {
				if e.Partition == nil {
					whole++
				}
			}
			if whole == 0 {
				t.Fatal("no whole GPUs published")
			}
			c := cluster(t, profile)
			if got, err := c.Allocate(ctx, profile, alloctest.Claim("over", req("gpu.tessera.dev", whole+1))); err != nil || got != nil {
				t.Fatalf("%d GPUs: got %v, err %v; want no fit", whole+1, got, err)
			}
			if got, err := c.Allocate(ctx, profile, alloctest.Claim("all", req("gpu.tessera.dev", whole))); err != nil || got == nil {
				t.Fatalf("%d GPUs: got %v, err %v; want a fit", whole, got, err)
			}
			// The node is full now, for any class.
			if got, _ := c.Allocate(ctx, profile, alloctest.Claim("more", req("gpu.tessera.dev", 1))); got != nil {
				t.Fatal("a full node accepted another claim")
			}
		})
	}
}

// TestSlicesRespectAPILimits checks every catalogue machine against the
// resource.k8s.io/v1 limits in docs/design.md.
func TestSlicesRespectAPILimits(t *testing.T) {
	for _, profile := range sim.CatalogNames() {
		t.Run(profile, func(t *testing.T) {
			objs, _ := publishNode(t, profile, "node-with-a-rather-long-name-0123456789")
			names := map[string]bool{}
			for _, s := range objs {
				if n := len(s.Spec.Devices); n > publish.MaxDevicesPerSlice {
					t.Errorf("slice %s has %d devices", s.GenerateName, n)
				}
				if s.Spec.Pool.ResourceSliceCount != int64(len(objs)) {
					t.Errorf("slice count %d, %d slices", s.Spec.Pool.ResourceSliceCount, len(objs))
				}
				for _, d := range s.Spec.Devices {
					if errs := validation.IsDNS1123Label(d.Name); len(errs) > 0 {
						t.Errorf("device name %q: %v", d.Name, errs)
					}
					if names[d.Name] {
						t.Errorf("duplicate device %s", d.Name)
					}
					names[d.Name] = true
					if n := len(d.Attributes) + len(d.Capacity); n > publish.MaxAttrsAndCapacity {
						t.Errorf("device %s: %d attributes+capacities", d.Name, n)
					}
					for k, a := range d.Attributes {
						if a.StringValue != nil && len(*a.StringValue) > 64 {
							t.Errorf("device %s attribute %s: %d chars", d.Name, k, len(*a.StringValue))
						}
						if strings.Contains(string(k), "/") && !strings.HasPrefix(string(k), "resource.kubernetes.io/") {
							t.Errorf("device %s: unexpected qualified attribute %s", d.Name, k)
						}
					}
					for _, core := range []resourceapi.QualifiedName{"type", "vendor", "model", "productName", "architecture", "driverVersion", "uuid", "fabric", "fabricIsland", "fabricBandwidthGBps"} {
						if _, ok := d.Attributes[core]; !ok {
							t.Errorf("device %s lacks core attribute %s", d.Name, core)
						}
					}
				}
			}
		})
	}
}
