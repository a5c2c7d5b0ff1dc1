//go:build cgo && linux

package nvml

import (
	"context"
	"slices"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/tessera-gpu/tessera/internal/fabric"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// A mixed node: two A100 PCIe cards joined by an NVLink bridge (4 NVLink
// 3.0 links), an A30 and an H200 without NVLink. The pair is one nvlink
// island of 100 GB/s each; the others are PCIe islands of their own.
func TestMixedNodeBridgedPair(t *testing.T) {
	slots := []gpuSlot{
		{bdf: "0000:17:00.0", root: "pci0000:16", numa: 0},
		{bdf: "0000:65:00.0", root: "pci0000:64", numa: 0},
		{bdf: "0000:ca:00.0", root: "pci0000:c9", numa: 1},
		{bdf: "0000:e3:00.0", root: "pci0000:e2", numa: 1},
	}
	s, root := newMachine(t, []gpus.Config{gpus.A100_PCIE_40GB, gpus.A30_PCIE_24GB, gpus.A100_PCIE_40GB, gpus.H200_SXM5_141GB}, slots)
	bridge(s.Devices[0].(*server.Device), s.Devices[2].(*server.Device), 4, uint32(nvml.NVLINK_VERSION_3_0))

	n, err := newBackend(t, s, root).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	models := []string{n.GPUs[0].Model, n.GPUs[1].Model, n.GPUs[2].Model, n.GPUs[3].Model}
	if models[0] != "A100" || models[1] != "A30" || models[2] != "A100" || models[3] != "H200" {
		t.Errorf("models %v", models)
	}
	want := []inventory.Link{{Kind: inventory.LinkNVLink, A: 0, B: 2, BandwidthGBps: 100}}
	if len(n.Links) != 1 || n.Links[0] != want[0] {
		t.Errorf("links %+v, want %+v", n.Links, want)
	}
	f, err := fabric.Compute(n)
	if err != nil {
		t.Fatal(err)
	}
	if f[0].Kind != inventory.LinkNVLink || f[0].Island != f[2].Island || f[0].BandwidthGBps != 100 {
		t.Errorf("pair fabric %+v / %+v", f[0], f[2])
	}
	if f[1].Kind != inventory.LinkPCIe || f[1].Island == f[0].Island || f[1].Island == f[3].Island {
		t.Errorf("A30 fabric %+v", f[1])
	}
	if g := n.GPUs[3]; g.PCIeRoot != "pci0000:e2" || g.NUMANode != 1 || g.PCIBusID != "0000:e3:00.0" || !slices.Equal(g.PCIeBridges, []string{"0000:e2:01.0"}) {
		t.Errorf("H200 PCI %s %s %v %d, want behind root port 0000:e2:01.0", g.PCIBusID, g.PCIeRoot, g.PCIeBridges, g.NUMANode)
	}
}

// Links to a GPU that is not published (lost) are not edges.
func TestLinkToUnpublishedGPUIgnored(t *testing.T) {
	slots := []gpuSlot{{bdf: "0000:17:00.0", root: "pci0000:16"}, {bdf: "0000:65:00.0", root: "pci0000:64"}}
	s, root := newMachine(t, gpus.Multiple(2, gpus.A100_PCIE_40GB), slots)
	a, b := s.Devices[0].(*server.Device), s.Devices[1].(*server.Device)
	bridge(a, b, 4, uint32(nvml.NVLINK_VERSION_3_0))
	a.GetNvLinkRemoteDeviceTypeFunc = func(int) (nvml.IntNvLinkDeviceType, nvml.Return) {
		return nvml.NVLINK_DEVICE_TYPE_GPU, nvml.SUCCESS
	}
	b.GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_GPU_IS_LOST }
	n, err := newBackend(t, s, root).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(n.GPUs) != 1 || len(n.Links) != 0 {
		t.Errorf("GPUs %d links %+v, want 1 GPU and no links", len(n.GPUs), n.Links)
	}
}
