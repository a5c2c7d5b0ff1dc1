//go:build cgo && linux

package nvml

import (
	"context"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// carve makes a GI of the profile at start with one full-size CI, through
// the mock's own create calls.
func carve(t *testing.T, d *server.Device, profile, start, size int) {
	t.Helper()
	info, ret := d.GetGpuInstanceProfileInfo(profile)
	if ret != nvml.SUCCESS {
		t.Fatalf("profile %d: %v", profile, ret)
	}
	gi, ret := d.CreateGpuInstanceWithPlacement(&info, &nvml.GpuInstancePlacement{Start: uint32(start), Size: uint32(size)})
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	ci, ret := gi.GetComputeInstanceProfileInfo(fullComputeInstanceProfile[info.SliceCount], nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	if _, ret := gi.CreateComputeInstance(&ci); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
}

func dgxA100Slots() []gpuSlot {
	var out []gpuSlot
	for i, bus := range []string{"07", "0f", "47", "4e", "87", "90", "b7", "bd"} {
		out = append(out, gpuSlot{bdf: "0000:" + bus + ":00.0", root: "pci0000:" + bus[:1] + "0", numa: i / 4})
	}
	return out
}

// An A100 with MIG on and two instances publishes them as partitions, with
// MIG UUIDs, placements and GI/CI ids; the others stay whole GPUs.
func TestA100MIGInstances(t *testing.T) {
	s, root := newMachine(t, gpus.Multiple(8, gpus.A100_SXM4_40GB), dgxA100Slots())
	d0 := s.Devices[0].(*server.Device)
	if _, ret := d0.SetMigMode(nvml.DEVICE_MIG_ENABLE); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	carve(t, d0, nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4, 4)
	carve(t, d0, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0, 1)

	n, err := newBackend(t, s, root).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	g := n.GPUs[0]
	if g.Model != "A100" || g.Architecture != "ampere" || g.ComputeUnits != 108 || g.ComputeCapability != "8.0.0" {
		t.Errorf("GPU 0: model %q arch %q SMs %d cc %q", g.Model, g.Architecture, g.ComputeUnits, g.ComputeCapability)
	}
	pt := g.Partitioning
	if pt == nil || !pt.Enabled || !pt.ModeChangeNeedsReset {
		t.Fatalf("partitioning %+v: want MIG enabled, mode change needs reset (Ampere)", pt)
	}
	if len(g.Partitions) != 2 {
		t.Fatalf("partitions %+v, want 2", g.Partitions)
	}
	p0, p1 := g.Partitions[0], g.Partitions[1]
	if p0.Profile != "1g.5gb" || p0.Placement != (inventory.Placement{Start: 0, Size: 1}) || p0.ComputeUnits != 14 || p0.GPUInstanceID != 1 {
		t.Errorf("first partition %+v, want 1g.5gb at 0, 14 SMs, GI 1", p0)
	}
	if p1.Profile != "3g.20gb" || p1.Placement.Start != 4 || p1.ComputeUnits != 42 || p1.GPUInstanceID != 0 || p1.ComputeInstanceID != 0 {
		t.Errorf("second partition %+v, want 3g.20gb at 4, 42 SMs, GI 0 CI 0", p1)
	}
	for _, p := range g.Partitions {
		if !strings.HasPrefix(p.UUID, "MIG-") || p.Kind != inventory.PartitionMIG || p.MemoryBytes == 0 {
			t.Errorf("partition %+v: want MIG- UUID, kind mig, memory", p)
		}
	}
	if g.Health.State != inventory.Healthy {
		t.Errorf("health %+v", g.Health)
	}

	res, err := publish.Build("n", n, publish.Options{Partitioning: publish.Static})
	if err != nil {
		t.Fatal(err)
	}
	// 7 whole GPUs + 2 partitions; GPU 0 is not published whole.
	if len(res.Order) != 9 {
		t.Errorf("published %v, want 7 GPUs and 2 partitions", res.Order)
	}
	if _, ok := res.Devices["gpu-0-mig-1g-5gb-0"]; !ok {
		t.Errorf("no gpu-0-mig-1g-5gb-0 in %v", res.Order)
	}
}

// A CI without a MIG device handle cannot be handed out: it is left out
// and the GPU is degraded with the reason.
func TestMIGInstanceWithoutHandleDegrades(t *testing.T) {
	s, root := newMachine(t, gpus.Multiple(1, gpus.A100_SXM4_40GB), dgxA100Slots()[:1])
	d := s.Devices[0].(*server.Device)
	d.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	carve(t, d, nvml.GPU_INSTANCE_PROFILE_1_SLICE, 0, 1)
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	d.GetMigDeviceHandleByIndexFunc = func(int) (nvml.Device, nvml.Return) { return nil, nvml.ERROR_NOT_FOUND }
	n, err := newBackend(t, s, root).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	g := n.GPUs[0]
	if len(g.Partitions) != 0 || g.Health.State != inventory.Unhealthy || !strings.Contains(g.Health.Reason, "without a MIG device handle") {
		t.Errorf("partitions %+v health %+v", g.Partitions, g.Health)
	}
}

// MaxInstances is published only where the instance count is below the
// number of placements, i.e. a limit of its own.
func TestMaxInstances(t *testing.T) {
	for _, tc := range []struct {
		name              string
		count, placements int
		want              int
	}{
		{"1g.10gb: 7 of 7 placements", 7, 7, 0},
		{"1g.10gb+me: 1 of 7 placements", 1, 7, 1},
		{"1g.20gb: 4 of 4 placements", 4, 4, 0},
		{"7g.80gb: 1 of 1 placement", 1, 1, 0},
		{"count unknown (0)", 0, 7, 0},
		{"count above placements", 9, 7, 0},
	} {
		if got := maxInstances(uint32(tc.count), tc.placements); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
