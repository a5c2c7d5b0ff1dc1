package amd

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tessera-gpu/tessera/internal/gpuvendor"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// Character-device regions of AMD's nodes.
const (
	majorDRM = "drm" // dri/card<N>, dri/renderD<N>
	majorKFD = "kfd"
)

// Vendor is AMD.
type Vendor struct{}

var _ gpuvendor.Vendor = Vendor{}

func (Vendor) Name() inventory.Vendor { return inventory.VendorAMD }
func (Vendor) DisplayName() string    { return "AMD" }
func (Vendor) Majors() []string       { return []string{majorDRM, majorKFD} }

func (Vendor) Capabilities() gpuvendor.Capabilities {
	// amdgpu registers each device's VRAM with the dmem controller; a
	// compute partition's memory is the device's (one region per device).
	return gpuvendor.Capabilities{PartitionKind: inventory.PartitionXCP, DynamicPartitions: true, PartitionModes: true, PartitionPeerLinks: true,
		Passthrough: true, HostDriver: "amdgpu", PCIVendorID: "0x1002",
		DmemRegion: "drm/%s/vram0", KernelLimit: "dmem"}
}

func (Vendor) GPUNodes(g *inventory.GPU) ([]gpuvendor.Node, error) {
	return driNodes(g.Minor, g.RenderMinor)
}

// PartitionNodes are the partition's own DRM nodes: each XCP is its own
// DRM device.
func (Vendor) PartitionNodes(_ *inventory.GPU, p *inventory.Partition) ([]gpuvendor.Node, error) {
	if p.Kind != inventory.PartitionXCP {
		return nil, fmt.Errorf("AMD partition %s has kind %q, want %q", p.UUID, p.Kind, inventory.PartitionXCP)
	}
	return driNodes(p.Minor, p.RenderMinor)
}

// DeviceNodes of a partition are its own nodes only, not the parent's.
func (v Vendor) DeviceNodes(g *inventory.GPU, p *inventory.Partition) ([]gpuvendor.Node, error) {
	if p != nil {
		return v.PartitionNodes(g, p)
	}
	return v.GPUNodes(g)
}

// CommonNodes: KFD is the one compute interface ROCm opens for all GPUs;
// access to a GPU is then decided by which render nodes the container has.
func (Vendor) CommonNodes() []gpuvendor.Node {
	return []gpuvendor.Node{{Path: "kfd", Major: majorKFD, Minor: 0}}
}

func (Vendor) HostNodes([]*inventory.GPU) []gpuvendor.Node { return nil }

// CommonEnv is empty: ROCm finds its GPUs from the render nodes present,
// and a variable invented for it would only mislead.
func (Vendor) CommonEnv([]gpuvendor.Device) ([]string, error) { return nil, nil }

// OrderedDevicesEnv is HIP_VISIBLE_DEVICES with the GPUs' unique ids as
// ROCm names them, "GPU-" and 16 hex digits (rocminfo's Uuid), the form
// ROCR_ and HIP_VISIBLE_DEVICES accept; HIP numbers them in that order.
func (Vendor) OrderedDevicesEnv(gpus []*inventory.GPU) (string, error) {
	ids := make([]string, len(gpus))
	for i, g := range gpus {
		ids[i] = g.UUID
		if g.UUID != "" && !strings.HasPrefix(g.UUID, "GPU-") {
			ids[i] = "GPU-" + g.UUID
		}
	}
	l, err := gpuvendor.UUIDList(gpus, ids)
	return "HIP_VISIBLE_DEVICES=" + l, err
}

func driNodes(card, render int) ([]gpuvendor.Node, error) {
	if err := gpuvendor.CheckMinor("card minor", card); err != nil {
		return nil, err
	}
	if err := gpuvendor.CheckMinor("render minor", render); err != nil {
		return nil, err
	}
	return []gpuvendor.Node{
		{Path: "dri/renderD" + strconv.Itoa(render), Major: majorDRM, Minor: int64(render)},
		{Path: "dri/card" + strconv.Itoa(card), Major: majorDRM, Minor: int64(card)},
	}, nil
}
