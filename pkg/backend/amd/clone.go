package amd

import (
	"maps"
	"slices"

	"github.com/tessera-gpu/tessera/pkg/inventory"
)

// cloneNode deep-copies an inventory so callers cannot change the cache.
func cloneNode(n *inventory.Node) *inventory.Node {
	out := &inventory.Node{GPUs: slices.Clone(n.GPUs), Links: slices.Clone(n.Links)}
	for i := range out.GPUs {
		g := &out.GPUs[i]
		g.Engines = maps.Clone(g.Engines)
		g.Partitions = slices.Clone(g.Partitions)
		if g.Partitioning != nil {
			p := *g.Partitioning
			p.Profiles = slices.Clone(p.Profiles)
			for j := range p.Profiles {
				p.Profiles[j].Placements = slices.Clone(p.Profiles[j].Placements)
			}
			g.Partitioning = &p
		}
	}
	return out
}
