package nvidia

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tessera-gpu/tessera/internal/gpuvendor"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// Character-device regions of NVIDIA's nodes.
const (
	majorFrontend = "nvidia-frontend" // nvidia<N> and nvidiactl
	majorUVM      = "nvidia-uvm"      // nvidia-uvm, nvidia-uvm-tools
	majorCaps     = "nvidia-caps"     // nvidia-caps/nvidia-cap<N>
)

// minorCtl is nvidiactl's minor, the one after the last GPU's.
const minorCtl = 255

// Vendor is NVIDIA.
type Vendor struct{}

var _ gpuvendor.Vendor = Vendor{}

func (Vendor) Name() inventory.Vendor { return inventory.VendorNVIDIA }
func (Vendor) DisplayName() string    { return "NVIDIA" }
func (Vendor) Majors() []string       { return []string{majorFrontend, majorUVM, majorCaps} }

func (Vendor) Capabilities() gpuvendor.Capabilities {
	return gpuvendor.Capabilities{
		PartitionKind:      inventory.PartitionMIG,
		DynamicPartitions:  true,
		Passthrough:        true,
		HostDriver:         "nvidia",
		PCIVendorID:        "0x10de",
		TimeSliceIntervals: true,
		MPS:                true,
		EnforcedShares:     true,
		// The open kernel module registers its video memory from r615,
		// where MPS memory partitioning (non-MIG GPUs) enforces it.
		DmemRegion:         "nvidia/%s/vidmem",
		KernelLimit:        "nvml",
		KernelMemoryDriver: "615.0.0",
		// MPS v3 (CUDA 13.4) came with r615 too.
		MPSNamespacesDriver: "615.0.0",
	}
}

func (Vendor) GPUNodes(g *inventory.GPU) ([]gpuvendor.Node, error) {
	if err := gpuvendor.CheckMinor("GPU minor", g.Minor); err != nil {
		return nil, err
	}
	return []gpuvendor.Node{{Path: "nvidia" + strconv.Itoa(g.Minor), Major: majorFrontend, Minor: int64(g.Minor)}}, nil
}

// PartitionNodes are a MIG instance's GPU-instance and compute-instance
// access capabilities.
func (Vendor) PartitionNodes(g *inventory.GPU, p *inventory.Partition) ([]gpuvendor.Node, error) {
	if p.Kind != inventory.PartitionMIG {
		return nil, fmt.Errorf("NVIDIA partition %s has kind %q, want %q", p.UUID, p.Kind, inventory.PartitionMIG)
	}
	gi, ci, err := MIGCapMinors(g.Minor, p.GPUInstanceID, p.ComputeInstanceID)
	if err != nil {
		return nil, fmt.Errorf("NVIDIA partition %s: %w", p.UUID, err)
	}
	return []gpuvendor.Node{capNode(gi), capNode(ci)}, nil
}

// DeviceNodes of a MIG instance include its parent's node: CUDA opens the
// GPU, then the instance through the capabilities.
func (v Vendor) DeviceNodes(g *inventory.GPU, p *inventory.Partition) ([]gpuvendor.Node, error) {
	nodes, err := v.GPUNodes(g)
	if err != nil || p == nil {
		return nodes, err
	}
	caps, err := v.PartitionNodes(g, p)
	if err != nil {
		return nil, err
	}
	return append(nodes, caps...), nil
}

// CommonNodes: control, unified memory and its tools node, needed once by
// any CUDA process, whatever GPUs it sees.
func (Vendor) CommonNodes() []gpuvendor.Node {
	return []gpuvendor.Node{
		{Path: "nvidiactl", Major: majorFrontend, Minor: minorCtl},
		{Path: "nvidia-uvm", Major: majorUVM, Minor: 0},
		{Path: "nvidia-uvm-tools", Major: majorUVM, Minor: 1},
	}
}

// HostNodes are MIG's config and monitor capabilities, which the driver
// creates once any GPU can do MIG.
func (Vendor) HostNodes(gpus []*inventory.GPU) []gpuvendor.Node {
	for _, g := range gpus {
		if g.Partitioning != nil && g.Partitioning.Kind == inventory.PartitionMIG {
			return []gpuvendor.Node{capNode(MIGConfigMinor), capNode(MIGMonitorMinor)}
		}
	}
	return nil
}

// CommonEnv names the claim's devices for the NVIDIA container stack and
// CUDA: whole GPUs by GPU UUID, MIG instances by MIG UUID, each once.
// OrderedDevicesEnv is CUDA_VISIBLE_DEVICES with the GPUs' UUIDs, which
// CUDA numbers in the order given.
func (Vendor) OrderedDevicesEnv(gpus []*inventory.GPU) (string, error) {
	ids := make([]string, len(gpus))
	for i, g := range gpus {
		ids[i] = g.UUID
	}
	l, err := gpuvendor.UUIDList(gpus, ids)
	return "CUDA_VISIBLE_DEVICES=" + l, err
}

func (Vendor) CommonEnv(devs []gpuvendor.Device) ([]string, error) {
	seen := map[string]bool{}
	var uuids []string
	for _, d := range devs {
		uuid := d.UUID()
		if uuid == "" {
			return nil, fmt.Errorf("NVIDIA device %s has no UUID", d.Name)
		}
		if !seen[uuid] {
			seen[uuid] = true
			uuids = append(uuids, uuid)
		}
	}
	return []string{"NVIDIA_VISIBLE_DEVICES=" + strings.Join(uuids, ",")}, nil
}

func capNode(minor int) gpuvendor.Node {
	return gpuvendor.Node{Path: "nvidia-caps/nvidia-cap" + strconv.Itoa(minor), Major: majorCaps, Minor: int64(minor)}
}
