package amd

import (
	"fmt"
	"strconv"

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
	return gpuvendor.Capabilities{PartitionKind: inventory.PartitionXCP, DmemRegion: "drm/%s/vram0", KernelLimit: "dmem"}
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
