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

// The gap DestroyStray closes, end to end on H100 and A100: a destroy whose
// GI step fails leaves an empty GI that a retried destroy and Discover no
// longer see and that blocks its placement; DestroyStray destroys it (and
// only it), the placement carves again, and a second sweep finds nothing.
func TestDestroyStrayAfterFailedDestroy(t *testing.T) {
	for _, tc := range []struct {
		name          string
		rig           func(t *testing.T) *rig
		profile, kept string // carved at 0 (then destroyed) and at 4 (kept)
	}{
		{"H100", h100On, "1g.10gb", "3g.40gb"},
		{"A100", a100On, "1g.5gb", "3g.20gb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.rig(t)
			a := r.create(t, tc.profile, 0)
			kept := r.create(t, tc.kept, 4)

			r.hw.fail[callDestroyGI] = nvml.ERROR_UNKNOWN
			err := r.b.DestroyPartition(r.ctx, r.gpu, a.UUID)
			r.hw.fail = map[string]nvml.Return{}
			if err == nil || !strings.Contains(err.Error(), "compute instance destroyed, GI") {
				t.Fatalf("destroy with a failing GI step: %v", err)
			}
			// The gap: the retry finds no partition, Discover shows none,
			// yet the empty GI still holds slice 0.
			if err := r.b.DestroyPartition(r.ctx, r.gpu, a.UUID); err != nil {
				t.Fatalf("retried destroy: %v", err)
			}
			if got := r.gpuNow(t).Partitions; !reflect.DeepEqual(got, []inventory.Partition{*kept}) {
				t.Fatalf("partitions %+v, want only %s", got, tc.kept)
			}
			if got := ciCounts(r); !reflect.DeepEqual(got, []int{0, 1}) {
				t.Fatalf("CIs per GI %v, want the empty GI and the kept one", got)
			}
			if _, err := r.b.CreatePartition(r.ctx, r.gpu, tc.profile, inventory.Placement{Start: 0}); err == nil ||
				!strings.Contains(err.Error(), "ERROR_INSUFFICIENT_RESOURCES") {
				t.Fatalf("carve over the stray GI: %v, want INSUFFICIENT_RESOURCES", err)
			}

			gen := generation(t, r)
			n, err := r.b.DestroyStray(r.ctx, r.gpu)
			if err != nil || n != 1 {
				t.Fatalf("DestroyStray = %d, %v; want 1, nil", n, err)
			}
			if generation(t, r) == gen {
				t.Error("Generation unchanged after destroying a GI")
			}
			if got := ciCounts(r); !reflect.DeepEqual(got, []int{1}) {
				t.Errorf("CIs per GI %v, want only the kept partition's", got)
			}

			again := r.create(t, tc.profile, 0)
			if got := r.gpuNow(t).Partitions; !reflect.DeepEqual(got, []inventory.Partition{*again, *kept}) {
				t.Errorf("partitions %+v, want the new carve and %s", got, tc.kept)
			}
			gen = generation(t, r)
			if n, err := r.b.DestroyStray(r.ctx, r.gpu); err != nil || n != 0 {
				t.Errorf("second DestroyStray = %d, %v; want 0, nil", n, err)
			}
			if generation(t, r) != gen {
				t.Error("Generation changed by a sweep that destroyed nothing")
			}
		})
	}
}

// Which GIs DestroyStray takes: exactly those without a CI, whoever made
// them; a GI with any CI (Tessera's, or several made outside it) stays. A
// GPU without MIG or with MIG off has none; an unknown GPU is an error; a
// GI that will not go, or cannot be checked, is named after the others are
// tried.
func TestDestroyStray(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rig   func(t *testing.T) *rig
		gpu   string // "" = the rig's GPU
		setup func(t *testing.T, r *rig)
		// wantN and wantErr are DestroyStray's result (wantErr: substrings
		// of the error; none means success); wantCIs the CI count of each
		// GI left, in placement order.
		wantN   int
		wantErr []string
		wantCIs []int
	}{
		{name: "no GPU instances", rig: h100On},
		{
			name: "partitions are kept", rig: h100On,
			setup: func(t *testing.T, r *rig) {
				r.create(t, "1g.10gb", 0)
				r.create(t, "3g.40gb", 4)
			},
			wantCIs: []int{1, 1},
		},
		{
			name: "a GI split into CIs outside Tessera is kept", rig: a100On,
			setup: func(t *testing.T, r *rig) {
				addCIs(t, bareGI(t, r, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4, 4), nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 2)
			},
			wantCIs: []int{2},
		},
		{
			name: "only the empty GIs go", rig: a100On,
			setup: func(t *testing.T, r *rig) {
				r.create(t, "1g.5gb", 0)
				bareGI(t, r, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 1, 1)
				bareGI(t, r, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 2, 1)
				addCIs(t, bareGI(t, r, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4, 4), nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 1)
			},
			wantN: 2, wantCIs: []int{1, 1},
		},
		{name: "MIG off", rig: h100Off},
		{
			name: "no MIG support", rig: h100Off,
			setup: func(_ *testing.T, r *rig) {
				r.d.GetMigModeFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }
			},
		},
		{
			name: "unknown GPU", rig: h100On, gpu: "GPU-nope",
			setup:   func(t *testing.T, r *rig) { bareGI(t, r, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0, 1) },
			wantErr: []string{"nvml: destroy stray GPU instances on GPU GPU-nope: no such GPU on this node"},
			wantCIs: []int{0},
		},
		{
			name: "GIs that will not go are named, the others still go", rig: h100On,
			setup: func(t *testing.T, r *rig) {
				for start := range 3 {
					gi := bareGI(t, r, nvml.GPU_INSTANCE_PROFILE_1_SLICE, start, 1)
					if start != 1 {
						gi.DestroyFunc = func() nvml.Return { return nvml.ERROR_UNKNOWN }
					}
				}
			},
			wantN: 1,
			wantErr: []string{
				"GI 0: nvmlGpuInstanceDestroy(GI 0): ERROR_UNKNOWN",
				"GI 2: nvmlGpuInstanceDestroy(GI 2): ERROR_UNKNOWN",
			},
			wantCIs: []int{0, 0},
		},
		{
			name: "a GI whose CIs cannot be listed is kept", rig: h100On,
			setup: func(t *testing.T, r *rig) {
				bareGI(t, r, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0, 1)
				r.hw.fail[callCIProfileInfo] = nvml.ERROR_UNKNOWN
			},
			wantErr: []string{"GI 0: nvmlGpuInstanceGetComputeInstanceProfileInfo(0): ERROR_UNKNOWN"},
			wantCIs: []int{0},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.rig(t)
			gpu := tc.gpu
			if gpu == "" {
				gpu = r.gpu
			}
			if tc.setup != nil {
				tc.setup(t, r)
			}
			gen := generation(t, r)
			n, err := r.b.DestroyStray(r.ctx, gpu)
			r.hw.fail = map[string]nvml.Return{}
			if n != tc.wantN {
				t.Errorf("destroyed %d, want %d", n, tc.wantN)
			}
			if (err != nil) != (len(tc.wantErr) > 0) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "nvml: destroy stray GPU instances on GPU "+gpu+": ") {
				t.Errorf("error %q does not say what failed on which GPU", err)
			}
			for _, want := range tc.wantErr {
				if err != nil && !strings.Contains(err.Error(), want) {
					t.Errorf("error %q, want it to contain %q", err, want)
				}
			}
			if changed := generation(t, r) != gen; changed != (tc.wantN > 0) {
				t.Errorf("Generation changed: %v, want %v", changed, tc.wantN > 0)
			}
			if got := ciCounts(r); !reflect.DeepEqual(got, tc.wantCIs) {
				t.Errorf("CIs per GI %v, want %v", got, tc.wantCIs)
			}
		})
	}
}

func a100On(t *testing.T) *rig { return a100Rig(t, true) }

// bareGI makes a GI of the profile at start with no CI, as a destroy that
// failed on the GI leaves one (or nvidia-smi mig -cgi without -C).
func bareGI(t *testing.T, r *rig, profile, start, size int) *server.GpuInstance {
	t.Helper()
	info, ret := r.d.GetGpuInstanceProfileInfo(profile)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	gi, ret := r.d.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: uint32(start), Size: uint32(size)})
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	return gi.(*server.GpuInstance)
}

// addCIs makes n CIs of the CI profile in gi, as nvidia-smi mig -cci does.
func addCIs(t *testing.T, gi nvml.GpuInstance, profile, n int) {
	t.Helper()
	info, ret := gi.GetComputeInstanceProfileInfo(profile, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	for range n {
		if _, ret := gi.CreateComputeInstance(&info); ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
	}
}

// ciCounts is the CI count of each GI on the rig's GPU, in placement order.
func ciCounts(r *rig) []int {
	var out []int
	for _, gi := range r.hw.instances() {
		out = append(out, gi[2])
	}
	return out
}

func generation(t *testing.T, r *rig) string {
	t.Helper()
	g, err := r.b.Generation()
	if err != nil {
		t.Fatal(err)
	}
	return g
}
