package publish_test

import (
	"fmt"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// sharedCluster is the machines published with sharing and partitioning,
// each as a node named after its profile.
func sharedCluster(t testing.TB, sharing publish.Sharing, part publish.Partitioning, profiles ...string) *alloctest.Cluster {
	t.Helper()
	classes, err := alloctest.Classes()
	if err != nil {
		t.Fatal(err)
	}
	var all []*resourceapi.ResourceSlice
	for _, p := range profiles {
		s, _ := alloctest.PublishSimWith(t, p, p, publish.Options{Partitioning: part, Sharing: sharing})
		all = append(all, s...)
	}
	return alloctest.NewCluster(all, classes)
}

// share is a claim for one device of class asking capacity (name, quantity
// pairs); no pairs asks nothing, which on a shared device is the whole of it.
func share(name, class string, capacity ...string) *resourceapi.ResourceClaim {
	r := alloctest.Request{Name: "gpu", Class: class, Capacity: map[string]string{}}
	for i := 0; i+1 < len(capacity); i += 2 {
		r.Capacity[capacity[i]] = capacity[i+1]
	}
	return alloctest.Claim(name, r)
}

// TestCapacitySharing runs the scheduler's allocator over a node published
// with --sharing=capacity: each step allocates one claim on top of the
// earlier ones and says which device it gets (or that it does not fit) and,
// where it matters, what it consumes.
func TestCapacitySharing(t *testing.T) {
	const nv = "nvidia.gpu.tessera.dev"
	type step struct {
		claim    *resourceapi.ResourceClaim
		want     string            // device; "" must not fit
		consumed map[string]string // capacity name to quantity, checked when set
	}
	tests := []struct {
		name    string
		sharing publish.Sharing
		part    publish.Partitioning
		profile string
		steps   []step
	}{
		{name: "three 7Gi shares fill an L4, the fourth opens the next", sharing: publish.SharingCapacity, profile: "l4-4", steps: []step{
			{claim: share("a", nv, "memory", "7Gi"), want: "gpu-0", consumed: map[string]string{"memory": "7Gi", "computeUnits": "0", "decoders": "0", "encoders": "0", "jpegDecoders": "0"}},
			{claim: share("b", nv, "memory", "7Gi"), want: "gpu-0"},
			{claim: share("c", nv, "memory", "7Gi"), want: "gpu-0"},
			{claim: share("d", nv, "memory", "7Gi"), want: "gpu-1"},
			// A claim asking nothing is the whole GPU: the first untouched one.
			{claim: share("whole", nv), want: "gpu-2", consumed: map[string]string{"memory": "23034Mi", "computeUnits": "0"}},
			{claim: share("whole2", nv), want: "gpu-3"},
			{claim: share("whole3", nv)},
			// Room is left on gpu-0 (1530Mi) and gpu-1 (15866Mi).
			{claim: share("e", nv, "memory", "1Gi"), want: "gpu-0"},
			{claim: share("f-too-big", nv, "memory", "16Gi")},
			{claim: share("f", nv, "memory", "15Gi"), want: "gpu-1"},
			{claim: share("g", nv, "memory", "1Gi")},
		}},
		{name: "two shares of 29 SMs fill an L4's 58", sharing: publish.SharingCapacity, profile: "l4-4", steps: []step{
			{claim: share("a", nv, "memory", "1Gi", "computeUnits", "29"), want: "gpu-0", consumed: map[string]string{"memory": "1Gi", "computeUnits": "29"}},
			{claim: share("b", nv, "memory", "1Gi", "computeUnits", "29"), want: "gpu-0"},
			{claim: share("c", nv, "memory", "1Gi", "computeUnits", "1"), want: "gpu-1"},
			// A memory-only share consumes no compute units: it still fits.
			{claim: share("d", nv, "memory", "1Gi"), want: "gpu-0"},
			{claim: share("e", nv, "computeUnits", "59")},
		}},
		{name: "shares that exactly fill a GPU", sharing: publish.SharingCapacity, profile: "l4-4", steps: []step{
			{claim: share("a", nv, "memory", "11517Mi"), want: "gpu-0"},
			{claim: share("b", nv, "memory", "11517Mi"), want: "gpu-0"},
			{claim: share("c", nv, "memory", "1Gi"), want: "gpu-1"},
		}},
		{name: "requests round up to the policy", sharing: publish.SharingCapacity, profile: "l4-4", steps: []step{
			{claim: share("tiny", nv, "memory", "100Mi"), want: "gpu-0", consumed: map[string]string{"memory": "1Gi"}},
			{claim: share("odd", nv, "memory", "7500000Ki"), want: "gpu-0", consumed: map[string]string{"memory": "7325Mi"}},
			{claim: share("cu", nv, "memory", "1Gi", "computeUnits", "2500m"), want: "gpu-0", consumed: map[string]string{"computeUnits": "3"}},
			{claim: share("toolarge", nv, "memory", "23035Mi")},
		}},
		{name: "whole GPUs exclude shares", sharing: publish.SharingCapacity, profile: "l4-4", steps: []step{
			{claim: share("w0", nv), want: "gpu-0"},
			{claim: share("w1", nv), want: "gpu-1"},
			{claim: share("w2", nv), want: "gpu-2"},
			{claim: share("w3", nv), want: "gpu-3"},
			{claim: share("a", nv, "memory", "1Gi")},
			{claim: share("b", nv, "computeUnits", "1")},
		}},
		{name: "without sharing a capacity request takes a whole GPU", sharing: publish.SharingNone, profile: "l4-4", steps: []step{
			{claim: share("a", nv, "memory", "7Gi"), want: "gpu-0"},
			{claim: share("b", nv, "memory", "7Gi"), want: "gpu-1"},
			{claim: share("c", nv, "memory", "7Gi"), want: "gpu-2"},
			{claim: share("d", nv, "memory", "7Gi"), want: "gpu-3"},
			{claim: share("e", nv, "memory", "7Gi")},
		}},
		{name: "AMD GPUs share too", sharing: publish.SharingCapacity, profile: "mixed-inference", steps: []step{
			{claim: share("a", "amd.gpu.tessera.dev", "memory", "32000Mi"), want: "gpu-4"},
			{claim: share("b", "amd.gpu.tessera.dev", "memory", "32000Mi", "computeUnits", "104"), want: "gpu-4"},
			{claim: share("c", "amd.gpu.tessera.dev", "memory", "2Gi")},
			{claim: share("d", "amd.gpu.tessera.dev", "memory", "1Gi"), want: "gpu-4"},
		}},
		{name: "static MIG instances are shared", sharing: publish.SharingCapacity, profile: "dgx-h100-mig", steps: []step{
			{claim: share("a", "mig.gpu.tessera.dev", "memory", "4Gi"), want: "gpu-6-mig-1g-10gb-0"},
			{claim: share("b", "mig.gpu.tessera.dev", "memory", "4Gi"), want: "gpu-6-mig-1g-10gb-0"},
			{claim: share("c", "mig.gpu.tessera.dev", "memory", "4Gi"), want: "gpu-6-mig-1g-10gb-1"},
		}},
		// A share of any MIG profile takes the first placement of the
		// smallest; the next, before the agent carves and republishes, the
		// next placement of the smallest, not a larger profile's
		// (occupancy.go).
		{name: "dynamic GPUs are not shared: a share takes a whole placement", sharing: publish.SharingCapacity, part: publish.Dynamic, profile: "dgx-h100", steps: []step{
			{claim: share("a", "mig.gpu.tessera.dev", "memory", "4Gi"), want: "gpu-7-mig-1g-10gb-5"},
			{claim: share("b", "mig.gpu.tessera.dev", "memory", "4Gi"), want: "gpu-7-mig-1g-10gb-4"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			part := tc.part
			if part == "" {
				part = publish.Static
			}
			c := sharedCluster(t, tc.sharing, part, tc.profile)
			for _, s := range tc.steps {
				res, err := c.Allocate(ctx, tc.profile, s.claim)
				if err != nil {
					t.Fatalf("claim %s: %v", s.claim.Name, err)
				}
				got := ""
				if res != nil {
					got = res[0].Devices.Results[0].Device
				}
				if got != s.want {
					t.Fatalf("claim %s got %q, want %q", s.claim.Name, got, s.want)
				}
				if res == nil {
					continue
				}
				r := res[0].Devices.Results[0]
				if tc.sharing == publish.SharingCapacity && part == publish.Static && r.ShareID == nil {
					t.Errorf("claim %s: no ShareID on a shared device", s.claim.Name)
				}
				for name, q := range s.consumed {
					have, ok := r.ConsumedCapacity[resourceapi.QualifiedName(name)]
					if want := resource.MustParse(q); !ok || have.Cmp(want) != 0 {
						t.Errorf("claim %s consumed %s = %s, want %s", s.claim.Name, name, have.String(), q)
					}
				}
			}
		})
	}
}

// TestSharedShape checks what --sharing=capacity publishes on every
// catalogue machine and mode: whole GPUs and static partitions are
// multi-allocatable with a policy on every capacity; a device consuming
// counters (a dynamic GPU) never is, so counters and shares are never
// mixed on one GPU.
func TestSharedShape(t *testing.T) {
	for _, profile := range []string{"dgx-h100", "dgx-h100-mig", "dgx-a100", "hgx-h200", "l4-4", "t4-2", "a100-pcie-pairs", "mi300x-8", "mixed-inference"} {
		for _, part := range []publish.Partitioning{publish.Static, publish.Dynamic} {
			t.Run(fmt.Sprintf("%s/%s", profile, part), func(t *testing.T) {
				objs, res := alloctest.PublishSimWith(t, profile, "n", publish.Options{Partitioning: part, Sharing: publish.SharingCapacity})
				shared := 0
				for _, s := range objs {
					for _, d := range s.Spec.Devices {
						multi := d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations
						e := res.Devices[d.Name]
						if multi != (e.Shared != nil) {
							t.Errorf("%s: multi-allocatable %v but entry shared %+v", d.Name, multi, e.Shared)
						}
						if !multi {
							continue
						}
						shared++
						if len(d.ConsumesCounters) > 0 {
							t.Errorf("%s consumes counters and is multi-allocatable", d.Name)
						}
						for name, c := range d.Capacity {
							p := c.RequestPolicy
							if p == nil || p.Default == nil || p.ValidRange == nil || p.ValidRange.Min == nil {
								t.Errorf("%s: capacity %s has no full request policy", d.Name, name)
								continue
							}
							if name == publish.CapMemory {
								if p.Default.Cmp(c.Value) != 0 || c.Value.Value()%publish.ShareMemoryStep != 0 || c.Value.Value() != e.Shared.MemoryBytes {
									t.Errorf("%s: memory %s default %s shared %d", d.Name, c.Value.String(), p.Default.String(), e.Shared.MemoryBytes)
								}
							} else if !p.Default.IsZero() {
								t.Errorf("%s: capacity %s defaults to %s, want 0", d.Name, name, p.Default.String())
							}
							// What the API server checks (validateRequestPolicyRange).
							if p.ValidRange.Min.Cmp(c.Value) > 0 || p.Default.Cmp(*p.ValidRange.Min) < 0 {
								t.Errorf("%s: capacity %s: min %s, default %s, value %s", d.Name, name, p.ValidRange.Min.String(), p.Default.String(), c.Value.String())
							}
							if st := p.ValidRange.Step; st != nil {
								m := p.ValidRange.Min.DeepCopy()
								m.Add(*st)
								if m.Cmp(c.Value) > 0 || (p.Default.Value()-p.ValidRange.Min.Value())%st.Value() != 0 {
									t.Errorf("%s: capacity %s: step %s does not fit value %s and default %s", d.Name, name, st.String(), c.Value.String(), p.Default.String())
								}
							}
						}
					}
				}
				if shared == 0 && !(part == publish.Dynamic && allDynamic(profile)) {
					t.Errorf("nothing shared on %s", profile)
				}
			})
		}
	}
}

// allDynamic: every GPU of the machine is published dynamically when asked
// (MIG, and AMD compute partition modes).
func allDynamic(profile string) bool {
	switch profile {
	case "dgx-h100", "dgx-h100-mig", "hgx-h200", "mi300x-8", "mi325x-8":
		return true
	}
	return false
}

func TestParseSharing(t *testing.T) {
	for in, want := range map[string]publish.Sharing{"": publish.SharingNone, "none": publish.SharingNone, "capacity": publish.SharingCapacity} {
		if got, err := publish.ParseSharing(in); err != nil || got != want {
			t.Errorf("ParseSharing(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := publish.ParseSharing("mps"); err == nil {
		t.Error("ParseSharing(mps) succeeded")
	}
}
