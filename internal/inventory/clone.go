package inventory

import (
	"maps"
	"slices"
)

// Clone deep-copies the node, so a backend can hand out its inventory
// without callers aliasing (and racing on) the backend's own state.
func (n *Node) Clone() *Node {
	out := &Node{GPUs: make([]GPU, len(n.GPUs)), Links: slices.Clone(n.Links), Unpublished: slices.Clone(n.Unpublished)}
	for i := range n.GPUs {
		out.GPUs[i] = n.GPUs[i].Clone()
	}
	return out
}

// Clone deep-copies the GPU, its partitioning table and its partitions.
func (g *GPU) Clone() GPU {
	c := *g
	c.Engines = maps.Clone(g.Engines)
	c.PCIeBridges = slices.Clone(g.PCIeBridges)
	if g.Partitioning != nil {
		p := *g.Partitioning
		p.Profiles = make([]PartitionProfile, len(g.Partitioning.Profiles))
		for i, pr := range g.Partitioning.Profiles {
			pr.Engines = maps.Clone(pr.Engines)
			pr.Placements = slices.Clone(pr.Placements)
			p.Profiles[i] = pr
		}
		c.Partitioning = &p
	}
	c.Partitions = make([]Partition, len(g.Partitions))
	for i := range g.Partitions {
		c.Partitions[i] = g.Partitions[i].Clone()
	}
	return c
}

// Clone deep-copies the partition.
func (p *Partition) Clone() Partition {
	c := *p
	c.Engines = maps.Clone(p.Engines)
	return c
}
