//go:build cgo && linux

package nvml

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"k8s.io/klog/v2/ktesting"
)

// go-nvml's mock server models GPUs, MIG profiles and GI/CI creation but
// leaves PCI bus IDs (GetPciInfo has only the device ID), NVLink, MIG device
// handles, SM counts and topology unset (a nil func panics when called).
// These helpers complete it for one machine.

// gpuSlot is where a GPU sits: its bus ID, PCIe root and NUMA node.
type gpuSlot struct {
	bdf, root string
	numa      int
	// bridges are the bridges between root and the GPU; nil: one root
	// port, <root's domain and bus>:01.0.
	bridges []string
}

// cudaCores is nvmlDeviceGetNumGpuCores for the mock's GPU configs: SMs x
// FP32 cores per SM (H100/H200 SXM5 132 x 128, A100 108 x 64, A30 56 x 64).
var cudaCores = map[string]int{
	gpus.H100_SXM5_80GB.Name:  132 * 128,
	gpus.H200_SXM5_141GB.Name: 132 * 128,
	gpus.A100_SXM4_40GB.Name:  108 * 64,
	gpus.A100_PCIE_40GB.Name:  108 * 64,
	gpus.A30_PCIE_24GB.Name:   56 * 64,
}

// nvmlBusID writes a bus ID as NVML does: 8-digit domain, upper case.
func nvmlBusID(bdf string) [32]int8 {
	var out [32]int8
	s := strings.ToUpper("0000" + bdf)
	for i := 0; i < len(s) && i < 31; i++ {
		out[i] = int8(s[i])
	}
	return out
}

// newMachine builds a mock server with the GPUs in the given slots and a
// sysfs fixture that places them, and completes the mock's empty funcs:
// no NVLink (NOT_SUPPORTED, as on PCIe-only GPUs), no fabric info and no
// NVLink speed field (NOT_SUPPORTED), whole-GPU attributes
// NOT_SUPPORTED (as NVML documents for non-MIG handles), CUDA core counts,
// and MIG device handles derived from the GI/CI state.
func newMachine(t *testing.T, cfgs []gpus.Config, slots []gpuSlot) (*server.Server, string) {
	t.Helper()
	s, err := server.New(server.WithGPUs(cfgs...), server.WithDriverVersion("580.65.06"), server.WithCUDADriverVersion(13000))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for i, dev := range s.Devices {
		d := dev.(*server.Device)
		slot := slots[i]
		d.PciBusID = slot.bdf
		completeDevice(d, slot.bdf)
		writeSysfs(t, root, slot)
	}
	return s, root
}

func completeDevice(d *server.Device, bdf string) {
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		return nvml.PciInfo{BusId: nvmlBusID(bdf), PciDeviceId: d.Config.PciDeviceId}, nvml.SUCCESS
	}
	d.GetAttributesFunc = func() (nvml.DeviceAttributes, nvml.Return) {
		return nvml.DeviceAttributes{}, nvml.ERROR_NOT_SUPPORTED
	}
	d.GetNumGpuCoresFunc = func() (int, nvml.Return) { return cudaCores[d.Config.Name], nvml.SUCCESS }
	// No fabric (pre-Hopper answer; the fabric tests set their own) and no
	// NVLink speed field (older drivers): the nominal table counts.
	d.GetGpuFabricInfoFunc = func() (nvml.GpuFabricInfo, nvml.Return) { return nvml.GpuFabricInfo{}, nvml.ERROR_NOT_SUPPORTED }
	d.GetFieldValuesFunc = func([]nvml.FieldValue) nvml.Return { return nvml.ERROR_NOT_SUPPORTED }
	noNVLink(d)
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	d.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		devs := migDevicesOf(d)
		if i < 0 || i >= len(devs) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return devs[i], nvml.SUCCESS
	}
}

func noNVLink(d *server.Device) {
	d.GetNvLinkStateFunc = func(int) (nvml.EnableState, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
}

// migDevicesOf models the MIG device handles of d's existing compute
// instances: UUID, GI/CI ids and the attributes NVML reports for them. The
// mock keeps instances in maps, so the list is sorted to give each index
// the same device on every call, as NVML does.
func migDevicesOf(d *server.Device) []nvml.Device {
	d.RLock()
	defer d.RUnlock()
	type keyed struct {
		key [2]int
		dev nvml.Device
	}
	var all []keyed
	for gi := range d.GpuInstances {
		gi.RLock()
		for ci := range gi.ComputeInstances {
			giProf := d.Config.MIGProfiles.GpuInstanceProfiles[int(gi.Info.ProfileId)]
			ciProf := d.Config.MIGProfiles.ComputeInstanceProfiles[int(gi.Info.ProfileId)][int(ci.Info.ProfileId)]
			giID, ciID := int(gi.Info.Id), int(ci.Info.Id)
			uuid := fmt.Sprintf("MIG-%s-%d-%d", strings.TrimPrefix(d.UUID, "GPU-")[:8], giID, ciID)
			all = append(all, keyed{[2]int{giID, ciID}, &mock.Device{
				GetUUIDFunc:              func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
				GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return giID, nvml.SUCCESS },
				GetComputeInstanceIdFunc: func() (int, nvml.Return) { return ciID, nvml.SUCCESS },
				GetAttributesFunc: func() (nvml.DeviceAttributes, nvml.Return) {
					return nvml.DeviceAttributes{
						MultiprocessorCount:   ciProf.MultiprocessorCount,
						SharedCopyEngineCount: giProf.CopyEngineCount,
						SharedDecoderCount:    giProf.DecoderCount,
						SharedEncoderCount:    giProf.EncoderCount,
						SharedJpegCount:       giProf.JpegCount,
						SharedOfaCount:        giProf.OfaCount,
						GpuInstanceSliceCount: giProf.SliceCount,
						MemorySizeMB:          giProf.MemorySizeMB,
					}, nvml.SUCCESS
				},
			}})
		}
		gi.RUnlock()
	}
	sort.Slice(all, func(a, b int) bool {
		return all[a].key[0] < all[b].key[0] || (all[a].key[0] == all[b].key[0] && all[a].key[1] < all[b].key[1])
	})
	out := make([]nvml.Device, len(all))
	for i, k := range all {
		out[i] = k.dev
	}
	return out
}

// nvswitchFabric gives every GPU n NVLinks of the given NVML version to
// one of four NVSwitch chips (bus IDs not among the GPUs), as on a DGX.
func nvswitchFabric(s *server.Server, n int, version uint32) {
	for _, dev := range s.Devices {
		d := dev.(*server.Device)
		d.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
			if l >= n {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return nvml.FEATURE_ENABLED, nvml.SUCCESS
		}
		d.GetNvLinkVersionFunc = func(int) (uint32, nvml.Return) { return version, nvml.SUCCESS }
		d.GetNvLinkRemotePciInfoFunc = func(l int) (nvml.PciInfo, nvml.Return) {
			return nvml.PciInfo{BusId: nvmlBusID(fmt.Sprintf("0000:%02x:00.0", 0xe0+l%4))}, nvml.SUCCESS
		}
		d.GetNvLinkRemoteDeviceTypeFunc = func(int) (nvml.IntNvLinkDeviceType, nvml.Return) {
			return nvml.NVLINK_DEVICE_TYPE_SWITCH, nvml.SUCCESS
		}
	}
}

// bridge joins two GPUs with n direct NVLinks (an NVLink bridge). The
// remote type call is NOT_SUPPORTED to exercise the bus-ID fallback.
func bridge(a, b *server.Device, n int, version uint32) {
	for _, p := range [][2]*server.Device{{a, b}, {b, a}} {
		self, peer := p[0], p[1]
		self.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
			if l >= n {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return nvml.FEATURE_ENABLED, nvml.SUCCESS
		}
		self.GetNvLinkVersionFunc = func(int) (uint32, nvml.Return) { return version, nvml.SUCCESS }
		self.GetNvLinkRemotePciInfoFunc = func(int) (nvml.PciInfo, nvml.Return) {
			return nvml.PciInfo{BusId: nvmlBusID(peer.PciBusID)}, nvml.SUCCESS
		}
		self.GetNvLinkRemoteDeviceTypeFunc = func(int) (nvml.IntNvLinkDeviceType, nvml.Return) {
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
	}
}

// writeSysfs lays out sys/bus/pci/devices/<bdf> as a relative symlink into
// sys/devices/<root>/<bridges>/<bdf>, with numa_node there, as Linux does.
func writeSysfs(t *testing.T, root string, s gpuSlot) {
	t.Helper()
	bridges := s.bridges
	if bridges == nil {
		bridges = []string{strings.TrimPrefix(s.root, "pci") + ":01.0"}
	}
	chain := filepath.Join(append([]string{s.root}, append(slices.Clone(bridges), s.bdf)...)...)
	dir := filepath.Join(root, "sys", "devices", chain)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "numa_node"), []byte(fmt.Sprintf("%d\n", s.numa)), 0o644); err != nil {
		t.Fatal(err)
	}
	links := filepath.Join(root, "sys", "bus", "pci", "devices")
	if err := os.MkdirAll(links, 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join("..", "..", "..", "devices", chain)
	if err := os.Symlink(target, filepath.Join(links, s.bdf)); err != nil {
		t.Fatal(err)
	}
}

func newBackend(t *testing.T, lib nvml.Interface, sysRoot string) *Backend {
	t.Helper()
	b, err := New(Options{Lib: lib, SysfsRoot: sysRoot, Logger: ktesting.NewLogger(t, ktesting.NewConfig())})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}
