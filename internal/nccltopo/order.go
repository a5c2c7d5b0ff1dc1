package nccltopo

import (
	"cmp"
	"slices"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// graph is the links among a claim's GPUs, by position in the claim.
type graph struct {
	n *inventory.Node
	// idx are the claim's GPUs (indices into n.GPUs).
	idx []int
	// fabric[a][b] is the NVLink, NVSwitch or xGMI bandwidth from a to b
	// (GB/s, one direction); 0: none. A shared NVSwitch plane links
	// every two GPUs on it.
	fabric [][]int64
	// pcie[a][b]: a PCIe peer link, the inventory's "same switch".
	pcie [][]bool
}

func newGraph(n *inventory.Node, idx []int) *graph {
	g := &graph{n: n, idx: idx, fabric: make([][]int64, len(idx)), pcie: make([][]bool, len(idx))}
	pos := make(map[int]int, len(idx))
	for p, i := range idx {
		pos[i] = p
		g.fabric[p] = make([]int64, len(idx))
		g.pcie[p] = make([]bool, len(idx))
	}
	planes := map[string][]int{}
	planeBW := map[string]int64{}
	for _, l := range n.Links {
		a, okA := pos[l.A]
		switch l.Kind {
		case inventory.LinkNVSwitch:
			if okA {
				planes[l.Switch] = append(planes[l.Switch], a)
				planeBW[l.Switch] = l.BandwidthGBps
			}
			continue
		}
		b, okB := pos[l.B]
		if !okA || !okB || a == b {
			continue
		}
		if l.Kind == inventory.LinkPCIe {
			g.pcie[a][b], g.pcie[b][a] = true, true
			continue
		}
		g.fabric[a][b] += l.BandwidthGBps
		g.fabric[b][a] += l.BandwidthGBps
	}
	for s, ms := range planes {
		for _, a := range ms {
			for _, b := range ms {
				if a != b {
					g.fabric[a][b] += planeBW[s]
				}
			}
		}
	}
	return g
}

func (g *graph) gpu(p int) *inventory.GPU { return &g.n.GPUs[g.idx[p]] }

// closer orders GPUs by place: NUMA node, PCIe root, bus ID.
func (g *graph) closer(a, b int) int {
	x, y := g.gpu(a), g.gpu(b)
	return cmp.Or(cmp.Compare(x.NUMANode, y.NUMANode), cmp.Compare(x.PCIeRoot, y.PCIeRoot), cmp.Compare(x.PCIBusID, y.PCIBusID))
}

// order returns the claim's positions in rank order, so that neighbouring
// ranks are linked wherever the links allow: starting from the first GPU
// by place, each next rank is the unvisited GPU with the most fabric
// bandwidth to the last one, then one behind the same PCIe switch, the
// same root, the same NUMA node, and then by place. On a fully linked set
// (an NVSwitch plane, an xGMI mesh) that is simply the order by place, so
// ranks on one NUMA node stay together.
func (g *graph) order() []int {
	byPlace := make([]int, len(g.idx))
	for i := range byPlace {
		byPlace[i] = i
	}
	slices.SortFunc(byPlace, g.closer)
	if len(byPlace) == 0 {
		return byPlace
	}
	out := []int{byPlace[0]}
	used := make([]bool, len(g.idx))
	used[byPlace[0]] = true
	for len(out) < len(byPlace) {
		last := out[len(out)-1]
		best := -1
		for _, c := range byPlace {
			if used[c] {
				continue
			}
			if best < 0 || g.better(last, c, best) {
				best = c
			}
		}
		used[best] = true
		out = append(out, best)
	}
	return out
}

// better reports whether c is a better next rank after last than b.
func (g *graph) better(last, c, b int) bool {
	if g.fabric[last][c] != g.fabric[last][b] {
		return g.fabric[last][c] > g.fabric[last][b]
	}
	if g.pcie[last][c] != g.pcie[last][b] {
		return g.pcie[last][c]
	}
	l, x, y := g.gpu(last), g.gpu(c), g.gpu(b)
	if (x.PCIeRoot == l.PCIeRoot) != (y.PCIeRoot == l.PCIeRoot) {
		return x.PCIeRoot == l.PCIeRoot
	}
	if (x.NUMANode == l.NUMANode) != (y.NUMANode == l.NUMANode) {
		return x.NUMANode == l.NUMANode
	}
	return g.closer(c, b) < 0
}
