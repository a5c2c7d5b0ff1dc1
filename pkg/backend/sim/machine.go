package sim

import (
	"maps"
	"slices"

	"github.com/tessera-gpu/tessera/pkg/inventory"
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

	// maxInstances[i][profile] caps partitions of a profile on GPU i where
	// the placements alone do not (see fileProfile.MaxInstances).
	maxInstances []map[string]int
}

// GPUIndex returns the index of the GPU with uuid in m.Node.GPUs, or -1.
func (m *Machine) GPUIndex(uuid string) int {
	return slices.IndexFunc(m.Node.GPUs, func(g inventory.GPU) bool { return g.UUID == uuid })
}

// maxInstancesOf returns the instance cap of profile on GPU i, 0 for none.
func (m *Machine) maxInstancesOf(i int, profile string) int {
	if i < 0 || i >= len(m.maxInstances) {
		return 0
	}
	return m.maxInstances[i][profile]
}

// cloneNode deep-copies an inventory so callers can never alias the
// backend's state (Discover hands its result to other goroutines).
func cloneNode(n *inventory.Node) *inventory.Node {
	out := &inventory.Node{
		GPUs:  make([]inventory.GPU, len(n.GPUs)),
		Links: slices.Clone(n.Links),
	}
	for i := range n.GPUs {
		out.GPUs[i] = cloneGPU(&n.GPUs[i])
	}
	return out
}

func cloneGPU(g *inventory.GPU) inventory.GPU {
	c := *g
	c.Engines = maps.Clone(g.Engines)
	if g.Partitioning != nil {
		p := *g.Partitioning
		p.Profiles = make([]inventory.PartitionProfile, len(g.Partitioning.Profiles))
		for i, pr := range g.Partitioning.Profiles {
			pr.Engines = maps.Clone(pr.Engines)
			pr.Placements = slices.Clone(pr.Placements)
			p.Profiles[i] = pr
		}
		c.Partitioning = &p
	}
	c.Partitions = make([]inventory.Partition, len(g.Partitions))
	for i := range g.Partitions {
		c.Partitions[i] = clonePartition(&g.Partitions[i])
	}
	return c
}

func clonePartition(p *inventory.Partition) inventory.Partition {
	c := *p
	c.Engines = maps.Clone(p.Engines)
	return c
}
