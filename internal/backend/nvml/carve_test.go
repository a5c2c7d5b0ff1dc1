//go:build cgo && linux

package nvml

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// Every profile of the H100 table carves at every one of its placements on
// an empty GPU; the partition has the profile's values, Discover publishes
// exactly what CreatePartition returned, and DestroyPartition leaves the
// GPU empty again.
func TestCreatePartitionEveryProfileAndPlacement(t *testing.T) {
	r := h100Rig(t, true)
	profiles := r.gpuNow(t).Partitioning.Profiles
	if len(profiles) != 7 {
		t.Fatalf("profiles %+v", profiles)
	}
	for _, prof := range profiles {
		for _, at := range prof.Placements {
			t.Run(fmt.Sprintf("%s@%d", prof.Name, at.Start), func(t *testing.T) {
				p, err := r.b.CreatePartition(r.ctx, r.gpu, prof.Name, at)
				if err != nil {
					t.Fatal(err)
				}
				want := inventory.Partition{
					Kind: inventory.PartitionMIG, Profile: prof.Name, Placement: at, UUID: p.UUID,
					MemoryBytes: prof.MemoryBytes, ComputeUnits: prof.ComputeUnits, Engines: prof.Engines,
				}
				if !reflect.DeepEqual(*p, want) || !strings.HasPrefix(p.UUID, "MIG-") {
					t.Errorf("created\n %+v\nwant\n %+v", *p, want)
				}
				if g := r.gpuNow(t); !reflect.DeepEqual(g.Partitions, []inventory.Partition{*p}) {
					t.Errorf("discovered %+v, want what CreatePartition returned", g.Partitions)
				}
				if got := r.hw.instances(); len(got) != 1 || got[0][0] != at.Start || got[0][2] != 1 {
					t.Errorf("GPU instances %v, want one at %d with one CI", got, at.Start)
				}
				if err := r.b.DestroyPartition(r.ctx, r.gpu, p.UUID); err != nil {
					t.Fatal(err)
				}
				if g := r.gpuNow(t); len(g.Partitions) != 0 || len(r.hw.instances()) != 0 {
					t.Errorf("after destroy: partitions %+v, instances %v", g.Partitions, r.hw.instances())
				}
			})
		}
	}
}

// What the profile table rules out is refused before NVML is asked to
// create anything, with an error that names the problem.
func TestCreatePartitionRejectsBeforeNVML(t *testing.T) {
	for _, tc := range []struct {
		name      string
		migOff    bool
		gpu       string // "" = the rig's GPU
		profile   string
		placement inventory.Placement
		want      string
	}{
		{name: "unknown profile", profile: "5g.50gb", want: `no MIG profile "5g.50gb" (it has: 1g.10gb, 1g.10gb+me,`},
		{name: "start not in the list", profile: "3g.40gb", placement: inventory.Placement{Start: 2}, want: "placement 2:4 is not one of profile 3g.40gb's placements (0:4, 4:4)"},
		{name: "wrong size", profile: "1g.10gb", placement: inventory.Placement{Start: 0, Size: 2}, want: "placement 0:2 is not one of"},
		{name: "past the end", profile: "1g.10gb", placement: inventory.Placement{Start: 7}, want: "placement 7:1 is not one of"},
		{name: "MIG off", migOff: true, profile: "1g.10gb", want: "MIG mode is not enabled"},
		{name: "unknown GPU", gpu: "GPU-nope", profile: "1g.10gb", want: "no such GPU on this node: GPU-nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h100Rig(t, !tc.migOff)
			gpu := tc.gpu
			if gpu == "" {
				gpu = r.gpu
			}
			p, err := r.b.CreatePartition(r.ctx, gpu, tc.profile, tc.placement)
			prefix := fmt.Sprintf("nvml: create partition %s at %d on GPU %s: ", tc.profile, tc.placement.Start, gpu)
			if p != nil || err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %+v, %v\nwant an error %q...%q", p, err, prefix, tc.want)
			}
			if n := r.hw.calls[callCreateGI]; n != 0 || len(r.hw.instances()) != 0 {
				t.Errorf("%d GI creates, instances %v: want none", n, r.hw.instances())
			}
		})
	}
}

// NVML's capacity rules, as the double models them, come back as errors
// that change nothing: a full GPU, an overlapping placement, a profile's
// instance count. Placements are given by start only (size 0).
func TestCreatePartitionCapacity(t *testing.T) {
	type step struct {
		profile string
		start   int
		ok      bool
	}
	full := func(profile string, n int) []step {
		var out []step
		for i := 0; i < n; i++ {
			out = append(out, step{profile, i, true})
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"seven 1g.10gb then the eighth fails", append(full("1g.10gb", 7), step{"1g.10gb", 3, false}, step{"1g.10gb+me", 6, false})},
		{"overlapping placements fail", []step{{"3g.40gb", 0, true}, {"1g.10gb", 2, false}, {"2g.20gb", 2, false}, {"4g.40gb", 0, false}, {"7g.80gb", 0, false}, {"1g.10gb", 4, true}}},
		{"+me once per GPU", []step{{"1g.10gb+me", 0, true}, {"1g.10gb+me", 1, false}, {"1g.10gb", 1, true}}},
		{"7g.80gb takes the GPU", []step{{"7g.80gb", 0, true}, {"1g.10gb", 6, false}, {"1g.20gb", 6, false}}},
		{"mixed to full", []step{{"4g.40gb", 0, true}, {"2g.20gb", 4, true}, {"1g.20gb", 6, true}, {"1g.10gb", 6, false}, {"3g.40gb", 4, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h100Rig(t, true)
			for i, s := range tc.steps {
				before, instances := r.gpuNow(t).Partitions, r.hw.instances()
				p, err := r.b.CreatePartition(r.ctx, r.gpu, s.profile, inventory.Placement{Start: s.start})
				if s.ok {
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					if got := r.gpuNow(t).Partitions; len(got) != len(before)+1 {
						t.Fatalf("step %d: partitions %+v after creating %+v", i, got, p)
					}
					continue
				}
				if err == nil || !is(err, nvml.ERROR_INSUFFICIENT_RESOURCES) || !strings.Contains(err.Error(), "overlaps a GPU instance, or") {
					t.Fatalf("step %d (%s at %d): %v, want INSUFFICIENT_RESOURCES explained", i, s.profile, s.start, err)
				}
				if after := r.gpuNow(t).Partitions; !reflect.DeepEqual(after, before) || !reflect.DeepEqual(r.hw.instances(), instances) {
					t.Errorf("step %d changed the GPU: %+v -> %+v", i, before, after)
				}
			}
		})
	}
}

// A failure at any NVML step of a carve returns an error naming the step,
// GPU, profile and placement, and leaves the GPU as it was: no GI or CI of
// the failed carve, the existing partition untouched.
func TestCreatePartitionRollsBack(t *testing.T) {
	for _, tc := range []struct {
		call     string // the failing call, or "" for noMIGHandle
		noHandle bool
		want     string
	}{
		{call: callGIProfileInfo, want: "nvmlDeviceGetGpuInstanceProfileInfo(0)"},
		{call: callCreateGI, want: "nvmlDeviceCreateGpuInstanceWithPlacement"},
		{call: callCIProfileInfo, want: "nvmlGpuInstanceGetComputeInstanceProfileInfo(2)"},
		{call: callCreateCI, want: "nvmlGpuInstanceCreateComputeInstance"},
		{call: callGIInfo, want: "nvmlGpuInstanceGetInfo"},
		{call: callCIInfo, want: "nvmlComputeInstanceGetInfo"},
		{call: callMIGHandle, want: "nvmlDeviceGetMigDeviceHandleByIndex(0)"},
		{call: callMIGUUID, want: "nvmlDeviceGetUUID(MIG)"},
		{noHandle: true, want: "no MIG device handle for GI 1 CI 0"},
	} {
		name := tc.call
		if tc.noHandle {
			name = "no MIG device"
		}
		t.Run(name, func(t *testing.T) {
			r := h100Rig(t, true)
			r.create(t, "4g.40gb", 0)
			before, instances := r.gpuNow(t).Partitions, r.hw.instances()

			r.hw.noMIGHandle = tc.noHandle
			if tc.call != "" {
				r.hw.fail[tc.call] = nvml.ERROR_UNKNOWN
			}
			p, err := r.b.CreatePartition(r.ctx, r.gpu, "3g.40gb", inventory.Placement{Start: 4, Size: 4})
			r.hw.noMIGHandle, r.hw.fail = false, map[string]nvml.Return{}

			prefix := "nvml: create partition 3g.40gb at 4 on GPU " + r.gpu + ": "
			if p != nil || err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %+v, %v; want %q...%q", p, err, prefix, tc.want)
			}
			if !tc.noHandle && !is(err, nvml.ERROR_UNKNOWN) {
				t.Errorf("error %v does not carry NVML's return code", err)
			}
			if got := r.hw.instances(); !reflect.DeepEqual(got, instances) {
				t.Errorf("instances %v, want %v (rolled back)", got, instances)
			}
			if after := r.gpuNow(t).Partitions; !reflect.DeepEqual(after, before) {
				t.Errorf("partitions %+v, want %+v", after, before)
			}
		})
	}
}

// A rollback that fails says so, and what it could not remove stays
// visible to the double (the driver cannot do better than report it).
func TestCreatePartitionRollbackFailure(t *testing.T) {
	r := h100Rig(t, true)
	r.hw.fail[callCreateCI] = nvml.ERROR_UNKNOWN
	r.hw.fail[callDestroyGI] = nvml.ERROR_UNKNOWN
	_, err := r.b.CreatePartition(r.ctx, r.gpu, "2g.20gb", inventory.Placement{Start: 2})
	r.hw.fail = map[string]nvml.Return{}
	if err == nil || !strings.Contains(err.Error(), "nvmlGpuInstanceCreateComputeInstance: ") ||
		!strings.Contains(err.Error(), "rolling back failed, MIG instances may be left behind: nvmlGpuInstanceDestroy: ") {
		t.Errorf("error %v", err)
	}
	if got := r.hw.instances(); len(got) != 1 || got[0][2] != 0 {
		t.Errorf("instances %v, want the GI that could not be destroyed", got)
	}
}

// Discover after several carves publishes each partition exactly as
// CreatePartition returned it, in placement order, with distinct UUIDs.
func TestDiscoverAfterCarves(t *testing.T) {
	r := h100Rig(t, true)
	c := r.create(t, "1g.10gb+me", 6)
	a := r.create(t, "3g.40gb", 0)
	b := r.create(t, "1g.20gb", 4)
	got := r.gpuNow(t).Partitions
	if want := []inventory.Partition{*a, *b, *c}; !reflect.DeepEqual(got, want) {
		t.Errorf("discovered\n %+v\nwant\n %+v", got, want)
	}
	if a.UUID == b.UUID || b.UUID == c.UUID || a.GPUInstanceID == b.GPUInstanceID {
		t.Errorf("partitions not distinct: %+v", got)
	}
}

// TestGenerationChangesWithPartitionCalls: the agent republishes when the
// generation changes, so every partition and mode call must change it.
func TestGenerationChangesWithPartitionCalls(t *testing.T) {
	r := h100Rig(t, true)
	gen := func() string {
		g, err := r.b.Generation()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	before := gen()
	p := r.create(t, "1g.10gb", 6)
	afterCreate := gen()
	if afterCreate == before {
		t.Error("generation unchanged by a carve")
	}
	if err := r.b.DestroyPartition(r.ctx, r.gpu, p.UUID); err != nil {
		t.Fatal(err)
	}
	if gen() == afterCreate {
		t.Error("generation unchanged by a destroy")
	}
}
