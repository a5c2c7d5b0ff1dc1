//go:build cgo && linux

package nvml

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// TestGenerationSeesChangesMadeOutside: partitions cut or removed and MIG
// mode switched with nvidia-smi (here: NVML calls on the device, not through
// the backend) move the generation, so the agent republishes without a
// restart; what Discover would not publish (a GI without a CI) and a GPU
// whose reads keep failing do not.
func TestGenerationSeesChangesMadeOutside(t *testing.T) {
	r := h100Rig(t, true)
	g0 := generation(t, r)
	if g := generation(t, r); g != g0 {
		t.Fatalf("generation moved with nothing changed: %s -> %s", g0, g)
	}

	info, ret := r.d.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	mustNVML(t, "profile info", ret)
	gi, ret := r.d.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: 6, Size: 1})
	mustNVML(t, "create GI", ret)
	if g := generation(t, r); g != g0 || len(r.gpuNow(t).Partitions) != 0 {
		t.Errorf("a GI without a CI: generation %s (was %s), partitions %v; want unchanged, none", g, g0, r.gpuNow(t).Partitions)
	}
	ciInfo, ret := gi.GetComputeInstanceProfileInfo(nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	mustNVML(t, "CI profile info", ret)
	ci, ret := gi.CreateComputeInstance(&ciInfo)
	mustNVML(t, "create CI", ret)
	g1 := generation(t, r)
	if g1 == g0 {
		t.Error("generation unchanged by a partition cut by hand")
	}
	if n := len(r.gpuNow(t).Partitions); n != 1 {
		t.Fatalf("Discover shows %d partitions, want the one cut by hand", n)
	}

	mustNVML(t, "destroy CI", ci.Destroy())
	mustNVML(t, "destroy GI", gi.Destroy())
	g2 := generation(t, r)
	if g2 == g1 {
		t.Error("generation unchanged by a partition destroyed by hand")
	}
	_, ret = r.d.SetMigMode(nvml.DEVICE_MIG_DISABLE)
	mustNVML(t, "MIG mode off", ret)
	g3 := generation(t, r)
	if g3 == g2 {
		t.Error("generation unchanged by MIG mode switched off by hand")
	}

	_, ret = r.d.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	mustNVML(t, "MIG mode on", ret)
	r.create(t, "1g.10gb", 0)
	r.hw.fail[callMIGUUID] = nvml.ERROR_UNKNOWN
	failing := generation(t, r)
	if g := generation(t, r); g != failing {
		t.Errorf("a GPU whose reads keep failing moves the generation: %s -> %s", failing, g)
	}
	delete(r.hw.fail, callMIGUUID)
	if g := generation(t, r); g == failing {
		t.Error("generation unchanged when the GPU reads again")
	}
}

func mustNVML(t *testing.T, what string, ret nvml.Return) {
	t.Helper()
	if ret != nvml.SUCCESS {
		t.Fatalf("%s: %v", what, nvml.ErrorString(ret))
	}
}
