//go:build cgo && linux

package nvml

import (
	"context"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/publish"
)

func TestLibraryAbsent(t *testing.T) {
	s, _ := newMachine(t, nil, nil)
	s.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
	_, err := New(Options{Lib: s, Logger: ktesting.NewLogger(t, ktesting.NewConfig())})
	if err == nil || !strings.Contains(err.Error(), "libnvidia-ml.so.1 not found") {
		t.Errorf("New: %v, want a library-not-found error", err)
	}
	if ok, reason := detect(s); ok || !strings.Contains(reason, "not found") {
		t.Errorf("detect: %v %q", ok, reason)
	}
}

func TestDetectShutsDown(t *testing.T) {
	s, _ := newMachine(t, gpus.Multiple(2, gpus.H100_SXM5_80GB), []gpuSlot{{bdf: "0000:18:00.0"}, {bdf: "0000:2a:00.0"}})
	inits, shutdowns := 0, 0
	s.InitFunc = func() nvml.Return { inits++; return nvml.SUCCESS }
	s.ShutdownFunc = func() nvml.Return { shutdowns++; return nvml.SUCCESS }
	ok, reason := detect(s)
	if !ok || inits != 1 || shutdowns != 1 || !strings.Contains(reason, "2 GPUs") {
		t.Errorf("detect: %v %q, %d inits %d shutdowns", ok, reason, inits, shutdowns)
	}
}

// One session: Init once in New, Shutdown once in Close, handles looked up
// once however often Discover runs.
func TestOneSession(t *testing.T) {
	s, root := newMachine(t, gpus.Multiple(2, gpus.H100_SXM5_80GB), []gpuSlot{{bdf: "0000:18:00.0"}, {bdf: "0000:2a:00.0"}})
	inits, shutdowns, lookups := 0, 0, 0
	s.InitFunc = func() nvml.Return { inits++; return nvml.SUCCESS }
	s.ShutdownFunc = func() nvml.Return { shutdowns++; return nvml.SUCCESS }
	get := s.DeviceGetHandleByIndexFunc
	s.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) { lookups++; return get(i) }
	b, err := New(Options{Lib: s, SysfsRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := b.Discover(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	_ = b.Close()
	_ = b.Close()
	if inits != 1 || shutdowns != 1 || lookups != 2 {
		t.Errorf("%d inits, %d shutdowns, %d handle lookups; want 1, 1, 2", inits, shutdowns, lookups)
	}
	if _, err := b.Discover(context.Background()); err == nil {
		t.Error("Discover after Close succeeded")
	}
}

// A lost GPU is left out; a GPU with one failing call is published
// Unhealthy with the reason; the node and the other GPUs are unaffected.
func TestLostAndFailingGPUs(t *testing.T) {
	m := dgxSlots()
	s, root := newMachine(t, gpus.Multiple(8, gpus.H100_SXM5_80GB), m)
	nvswitchFabric(s, 18, uint32(nvml.NVLINK_VERSION_4_0))
	get := s.DeviceGetHandleByIndexFunc
	s.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i == 3 {
			return nil, nvml.ERROR_GPU_IS_LOST
		}
		return get(i)
	}
	s.Devices[5].(*server.Device).GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_GPU_IS_LOST }
	s.Devices[6].(*server.Device).GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{}, nvml.ERROR_UNKNOWN }

	n, err := newBackend(t, s, root).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(n.GPUs) != 6 {
		t.Fatalf("%d GPUs, want 6 (3 and 5 lost)", len(n.GPUs))
	}
	for _, g := range n.GPUs {
		if g.PCIBusID == m[3].bdf || g.PCIBusID == m[5].bdf {
			t.Errorf("lost GPU %s published", g.PCIBusID)
		}
		want := inventory.Healthy
		if g.PCIBusID == m[6].bdf {
			want = inventory.Unhealthy
			if !strings.Contains(g.Health.Reason, "nvmlDeviceGetMemoryInfo") {
				t.Errorf("reason %q does not name the failing call", g.Health.Reason)
			}
		}
		if g.Health.State != want {
			t.Errorf("%s health %+v, want %s", g.PCIBusID, g.Health, want)
		}
	}
	if _, err := publish.Build("n", n, publish.Options{Partitioning: publish.Static}); err != nil {
		t.Errorf("slices of a degraded node: %v", err)
	}
}

func dgxSlots() []gpuSlot {
	var out []gpuSlot
	for i, bus := range []string{"18", "2a", "3a", "5d", "9a", "ab", "ba", "db"} {
		out = append(out, gpuSlot{bdf: "0000:" + bus + ":00.0", root: "pci0000:" + bus, numa: i / 4})
	}
	return out
}

// MIG mode unknown: the GPU is degraded and published without partitioning.
// MIG on but instances unreadable: degraded too.
func TestMIGQueryFailing(t *testing.T) {
	s, root := newMachine(t, gpus.Multiple(2, gpus.A100_SXM4_40GB), dgxA100Slots()[:2])
	d0, d1 := s.Devices[0].(*server.Device), s.Devices[1].(*server.Device)
	d0.GetMigModeFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_UNKNOWN }
	d1.SetMigMode(nvml.DEVICE_MIG_ENABLE)
	d1.GetGpuInstancesFunc = func(*nvml.GpuInstanceProfileInfo) ([]nvml.GpuInstance, nvml.Return) {
		return nil, nvml.ERROR_IN_USE
	}
	n, err := newBackend(t, s, root).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if g := n.GPUs[0]; g.Partitioning != nil || g.Health.State != inventory.Unhealthy || !strings.Contains(g.Health.Reason, "nvmlDeviceGetMigMode") {
		t.Errorf("GPU 0: partitioning %+v health %+v", g.Partitioning, g.Health)
	}
	if g := n.GPUs[1]; g.Partitioning == nil || !g.Partitioning.Enabled || g.Health.State != inventory.Unhealthy || !strings.Contains(g.Health.Reason, "nvmlDeviceGetGpuInstances") {
		t.Errorf("GPU 1: partitioning %+v health %+v", g.Partitioning, g.Health)
	}
}

// A GPU without MIG support (NOT_SUPPORTED) simply has no partitioning.
func TestNoMIGSupport(t *testing.T) {
	s, root := newMachine(t, gpus.Multiple(1, gpus.A100_PCIE_40GB), dgxA100Slots()[:1])
	s.Devices[0].(*server.Device).GetMigModeFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }
	n, err := newBackend(t, s, root).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if g := n.GPUs[0]; g.Partitioning != nil || g.Health.State != inventory.Healthy {
		t.Errorf("partitioning %+v health %+v", g.Partitioning, g.Health)
	}
}
