package sim

import (
	"slices"
	"time"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/vfio/simfs"
)

// Machine is a loaded, validated machine file for one node: the hardware as
// it is at power-on. A Backend starts from it and keeps the live state.
type Machine struct {
	// Name is the machine's name (the file's name: field, e.g. dgx-h100).
	Name string
	// Description is the file's free-text description.
	Description string
	// NodeName is the node the GPU UUIDs were derived for.
	NodeName string
	// Node is the inventory at power-on: GPUs in file order (count entries
	// expanded), the partitions the file creates, and the links.
	Node inventory.Node
	// Cgroup is the node's simulated cgroup hierarchy (cgroup.go).
	Cgroup Cgroup
	// ModeChangeTime is how long each GPU whose partitions are a GPU-wide
	// mode takes to enumerate a new mode's partitions, by UUID (modes.go);
	// a GPU missing from it changes at once.
	ModeChangeTime map[string]time.Duration
	// PCI is the node's PCI side (iommu.go): whether its IOMMU is on, and
	// every GPU, bridge and listed device as a function with its IOMMU
	// group and boot driver, from which the backend's sysfs tree is built.
	PCI simfs.Host
}

// GPUIndex returns the index of the GPU with uuid in m.Node.GPUs, or -1.
func (m *Machine) GPUIndex(uuid string) int {
	return slices.IndexFunc(m.Node.GPUs, func(g inventory.GPU) bool { return g.UUID == uuid })
}
