//go:build cgo && linux

package nvml

import (
	"context"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/google/uuid"

	"github.com/tessera-gpu/tessera/internal/fabric"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// gb200Cluster is the fabric cluster UUID of NVIDIA's published nvidia-smi
// -q capture of a real GB200 tray (clique 2); docs/nvml.md.
var gb200Cluster = uuid.MustParse("00000001-0000-0000-0000-000000000001")

// trayFabric makes every GPU of s a GB200 tray GPU as NVML answers for
// it: 18 NVLink 5 links, each to an NVSwitch (remote type SWITCH) whose
// remote PCI info is what remote returns, and fabric info per GPU index.
func trayFabric(s *server.Server, remote func() (nvml.PciInfo, nvml.Return), fabric func(i int) (nvml.GpuFabricInfo, nvml.Return)) {
	for i, dev := range s.Devices {
		d := dev.(*server.Device)
		d.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
			if l >= 18 {
				return 0, nvml.ERROR_INVALID_ARGUMENT
			}
			return nvml.FEATURE_ENABLED, nvml.SUCCESS
		}
		d.GetNvLinkVersionFunc = func(int) (uint32, nvml.Return) { return uint32(nvml.NVLINK_VERSION_5_0), nvml.SUCCESS }
		d.GetNvLinkRemotePciInfoFunc = func(int) (nvml.PciInfo, nvml.Return) { return remote() }
		d.GetNvLinkRemoteDeviceTypeFunc = func(int) (nvml.IntNvLinkDeviceType, nvml.Return) {
			return nvml.NVLINK_DEVICE_TYPE_SWITCH, nvml.SUCCESS
		}
		d.GetGpuFabricInfoFunc = func() (nvml.GpuFabricInfo, nvml.Return) { return fabric(i) }
	}
}

func placeholder() (nvml.PciInfo, nvml.Return) {
	// As NVML writes it: 8-digit domain, upper case.
	var id [32]int8
	for i, c := range "FFFFFFFF:FF:FF.0" {
		id[i] = int8(c)
	}
	return nvml.PciInfo{BusId: id}, nvml.SUCCESS
}

func completed(cluster uuid.UUID, clique uint32) (nvml.GpuFabricInfo, nvml.Return) {
	return nvml.GpuFabricInfo{State: nvml.GPU_FABRIC_STATE_COMPLETED, Status: uint32(nvml.SUCCESS), ClusterUuid: cluster, CliqueId: clique}, nvml.SUCCESS
}

func traySlots() []gpuSlot {
	return []gpuSlot{
		{bdf: "0008:01:00.0", root: "pci0008:00", numa: 0}, {bdf: "0009:01:00.0", root: "pci0009:00", numa: 0},
		{bdf: "0018:01:00.0", root: "pci0018:00", numa: 1}, {bdf: "0019:01:00.0", root: "pci0019:00", numa: 1},
	}
}

// NVSwitch links whose remote is the placeholder FFFFFFFF:FF:FF.0 (or
// whose remote PCI info does not answer) are switch links all the same:
// the GPUs of one tray are one fabric island, and fabricDomain is
// published only for a completed, successful registration in a real
// (non-zero) cluster.
func TestNVSwitchLinksAndFabricDomain(t *testing.T) {
	const domain = "00000001-0000-0000-0000-000000000001.2"
	for _, tc := range []struct {
		name    string
		remote  func() (nvml.PciInfo, nvml.Return)
		fabric  func(i int) (nvml.GpuFabricInfo, nvml.Return)
		islands int      // distinct fabricIsland values
		domains []string // fabricDomain per GPU
	}{
		{"GB200 tray: placeholder remote, fabric completed", placeholder,
			func(int) (nvml.GpuFabricInfo, nvml.Return) { return completed(gb200Cluster, 2) },
			1, []string{domain, domain, domain, domain}},
		{"remote PCI info not supported on switch links", func() (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{}, nvml.ERROR_NOT_SUPPORTED },
			func(int) (nvml.GpuFabricInfo, nvml.Return) { return completed(gb200Cluster, 2) },
			1, []string{domain, domain, domain, domain}},
		{"all-zero cluster UUID (HGX H100): no domain, one island", placeholder,
			func(int) (nvml.GpuFabricInfo, nvml.Return) { return completed(uuid.Nil, 0) },
			1, []string{"", "", "", ""}},
		{"fabric info NOT_SUPPORTED", placeholder,
			func(int) (nvml.GpuFabricInfo, nvml.Return) { return nvml.GpuFabricInfo{}, nvml.ERROR_NOT_SUPPORTED },
			1, []string{"", "", "", ""}},
		{"registration in progress on one GPU", placeholder,
			func(i int) (nvml.GpuFabricInfo, nvml.Return) {
				if i == 1 {
					return nvml.GpuFabricInfo{State: nvml.GPU_FABRIC_STATE_IN_PROGRESS, ClusterUuid: gb200Cluster, CliqueId: 2}, nvml.SUCCESS
				}
				return completed(gb200Cluster, 2)
			},
			// GPU 1's switch links cannot be told from the others' but
			// its domain can: it is kept apart until it has one.
			2, []string{domain, "", domain, domain}},
		{"registration failed (status not SUCCESS)", placeholder,
			func(int) (nvml.GpuFabricInfo, nvml.Return) {
				return nvml.GpuFabricInfo{State: nvml.GPU_FABRIC_STATE_COMPLETED, Status: uint32(nvml.ERROR_UNKNOWN), ClusterUuid: gb200Cluster, CliqueId: 2}, nvml.SUCCESS
			},
			1, []string{"", "", "", ""}},
		{"two cliques on one node", placeholder,
			func(i int) (nvml.GpuFabricInfo, nvml.Return) { return completed(gb200Cluster, uint32(2+i/2)) },
			2, []string{domain, domain, "00000001-0000-0000-0000-000000000001.3", "00000001-0000-0000-0000-000000000001.3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, root := newMachine(t, gpus.Multiple(4, gpus.B200_SXM5_180GB), traySlots())
			trayFabric(s, tc.remote, tc.fabric)
			n, err := newBackend(t, s, root).Discover(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(n.GPUs) != 4 {
				t.Fatalf("%d GPUs, want 4", len(n.GPUs))
			}
			f, err := fabric.Compute(n)
			if err != nil {
				t.Fatal(err)
			}
			islands := map[string]bool{}
			for i, g := range n.GPUs {
				islands[f[i].Island] = true
				if f[i].Kind != inventory.LinkNVSwitch || f[i].BandwidthGBps != 900 {
					t.Errorf("GPU %d fabric %s %d GB/s, want nvswitch 900 (18 NVLink 5 links)", i, f[i].Kind, f[i].BandwidthGBps)
				}
				if g.FabricDomain != tc.domains[i] {
					t.Errorf("GPU %d fabricDomain %q, want %q", i, g.FabricDomain, tc.domains[i])
				}
				if g.Health.State != inventory.Healthy {
					t.Errorf("GPU %d health %+v: no fabric answer is a fault", i, g.Health)
				}
			}
			if len(islands) != tc.islands {
				t.Errorf("%d fabric islands, want %d: %+v", len(islands), tc.islands, f)
			}
		})
	}
}

func TestPlaceholderBusID(t *testing.T) {
	for s, want := range map[string]bool{
		"FFFFFFFF:FF:FF.0": true, "ffff:ff:ff.0": true, " FFFFFFFF:FF:FF.0 ": true,
		"00000000:18:00.0": false, "FFFFFFFF:18:00.0": false, "0000:ff:ff.0": false, "": false,
	} {
		if got := isPlaceholderBusID(s); got != want {
			t.Errorf("isPlaceholderBusID(%q) = %v, want %v", s, got, want)
		}
	}
}
