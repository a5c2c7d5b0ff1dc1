//go:build cgo && linux

package nvml

import (
	"reflect"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// On an H100 with partitions a (1g.10gb at 0) and b (3g.40gb at 4):
// destroying removes the partition's CI and GI and nothing else; a
// partition that is not there is not an error; an unknown GPU is; a failed
// NVML destroy is reported with what was left.
func TestDestroyPartition(t *testing.T) {
	for _, tc := range []struct {
		name    string
		destroy func(r *rig, a, b *inventory.Partition) error
		wantErr string
		// wantParts are the partitions left, from a and b; wantCIs the CI
		// count of each GI left, in placement order.
		wantParts func(a, b *inventory.Partition) []inventory.Partition
		wantCIs   []int
	}{
		{
			name:      "removes CI and GI, keeps the rest",
			destroy:   func(r *rig, a, _ *inventory.Partition) error { return r.b.DestroyPartition(r.ctx, r.gpu, a.UUID) },
			wantParts: func(_, b *inventory.Partition) []inventory.Partition { return []inventory.Partition{*b} },
			wantCIs:   []int{1},
		},
		{
			name: "twice is not an error",
			destroy: func(r *rig, a, _ *inventory.Partition) error {
				if err := r.b.DestroyPartition(r.ctx, r.gpu, a.UUID); err != nil {
					return err
				}
				return r.b.DestroyPartition(r.ctx, r.gpu, a.UUID)
			},
			wantParts: func(_, b *inventory.Partition) []inventory.Partition { return []inventory.Partition{*b} },
			wantCIs:   []int{1},
		},
		{
			name:      "unknown partition is not an error",
			destroy:   func(r *rig, _, _ *inventory.Partition) error { return r.b.DestroyPartition(r.ctx, r.gpu, "MIG-nope") },
			wantParts: both, wantCIs: []int{1, 1},
		},
		{
			name: "a partition on another GPU is not this GPU's",
			destroy: func(r *rig, a, _ *inventory.Partition) error {
				// GPU 1 of the DGX has MIG off.
				return r.b.DestroyPartition(r.ctx, r.s.Devices[1].(*server.Device).UUID, a.UUID)
			},
			wantParts: both, wantCIs: []int{1, 1},
		},
		{
			name:      "unknown GPU is an error",
			destroy:   func(r *rig, a, _ *inventory.Partition) error { return r.b.DestroyPartition(r.ctx, "GPU-nope", a.UUID) },
			wantErr:   "on GPU GPU-nope: no such GPU on this node",
			wantParts: both, wantCIs: []int{1, 1},
		},
		{
			name: "CI in use: nothing changes",
			destroy: func(r *rig, a, _ *inventory.Partition) error {
				r.hw.fail[callDestroyCI] = nvml.ERROR_IN_USE
				return r.b.DestroyPartition(r.ctx, r.gpu, a.UUID)
			},
			wantErr:   "nvmlComputeInstanceDestroy(GI 0 CI 0)",
			wantParts: both, wantCIs: []int{1, 1},
		},
		{
			name: "GI destroy fails: partition gone, GI reported",
			destroy: func(r *rig, a, _ *inventory.Partition) error {
				r.hw.fail[callDestroyGI] = nvml.ERROR_UNKNOWN
				return r.b.DestroyPartition(r.ctx, r.gpu, a.UUID)
			},
			wantErr:   "compute instance destroyed, GI 0 kept: nvmlGpuInstanceDestroy(GI 0)",
			wantParts: func(_, b *inventory.Partition) []inventory.Partition { return []inventory.Partition{*b} },
			wantCIs:   []int{0, 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h100Rig(t, true)
			a := r.create(t, "1g.10gb", 0)
			b := r.create(t, "3g.40gb", 4)
			err := tc.destroy(r, a, b)
			r.hw.fail = map[string]nvml.Return{}
			if (err != nil) != (tc.wantErr != "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
			if got, want := r.gpuNow(t).Partitions, tc.wantParts(a, b); !reflect.DeepEqual(got, want) {
				t.Errorf("partitions\n %+v\nwant\n %+v", got, want)
			}
			var cis []int
			for _, gi := range r.hw.instances() {
				cis = append(cis, gi[2])
			}
			if !reflect.DeepEqual(cis, tc.wantCIs) {
				t.Errorf("CIs per GI %v, want %v", cis, tc.wantCIs)
			}
		})
	}
}

func both(a, b *inventory.Partition) []inventory.Partition { return []inventory.Partition{*a, *b} }

// With MIG off no partition exists, so there is nothing to destroy.
func TestDestroyPartitionMIGOff(t *testing.T) {
	r := h100Rig(t, false)
	if err := r.b.DestroyPartition(r.ctx, r.gpu, "MIG-anything"); err != nil {
		t.Error(err)
	}
}

// A GI split into several CIs outside Tessera (nvidia-smi mig -cci) is
// published as one partition per CI; destroying one keeps the GI for the
// others, destroying the last removes it.
func TestDestroyPartitionSharedGI(t *testing.T) {
	r := a100Rig(t, true)
	info, ret := r.d.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	gi, ret := r.d.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: 4, Size: 4})
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	ci, ret := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	for i := 0; i < 2; i++ {
		if _, ret := gi.CreateComputeInstance(&ci); ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
	}
	parts := r.gpuNow(t).Partitions
	if len(parts) != 2 || parts[0].Profile != "1c.3g.20gb" {
		t.Fatalf("partitions %+v, want two 1c.3g.20gb", parts)
	}
	if err := r.b.DestroyPartition(r.ctx, r.gpu, parts[0].UUID); err != nil {
		t.Fatal(err)
	}
	if got := r.gpuNow(t).Partitions; !reflect.DeepEqual(got, parts[1:]) {
		t.Errorf("partitions %+v, want %+v", got, parts[1:])
	}
	if got := r.hw.instances(); len(got) != 1 || got[0][2] != 1 {
		t.Errorf("instances %v, want the GI with the other CI", got)
	}
	if err := r.b.DestroyPartition(r.ctx, r.gpu, parts[1].UUID); err != nil {
		t.Fatal(err)
	}
	if got := r.hw.instances(); len(got) != 0 {
		t.Errorf("instances %v, want none", got)
	}
}
