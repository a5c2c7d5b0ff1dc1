package fabric

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// Attrs is a GPU's fabric as published in its attributes.
type Attrs struct {
	Kind inventory.LinkKind // nvswitch, nvlink, xgmi or pcie
	// Island is equal on all GPUs of one island.
	Island string
	// BandwidthGBps is the GPU's aggregate unidirectional bandwidth to its
	// fabric peers (for NVSwitch, its links to the switch plane).
	BandwidthGBps int64
	// BandwidthUnknown: one of the GPU's fabric links has a bandwidth the
	// backend could not read (inventory.Link.BandwidthUnknown), so the sum
	// would be too low; BandwidthGBps is 0 and the attribute is left out.
	BandwidthUnknown bool
	// Members are the GPU indices of the island, ascending.
	Members []int
}

// Compute returns the Attrs of each GPU of n, indexed like n.GPUs.
// It fails on links that name GPUs the node does not have.
func Compute(n *inventory.Node) ([]Attrs, error) {
	g := len(n.GPUs)
	adj := make([][]bool, g)
	for i := range adj {
		adj[i] = make([]bool, g)
	}
	kind := make([]inventory.LinkKind, g)
	bw := make([]int64, g)
	unknownBW := make([]bool, g)
	planes := map[string][]int{}

	setKind := func(i int, k inventory.LinkKind) {
		// NVSwitch outranks direct NVLink: a GPU on a switch plane reaches
		// every plane member, bridges only reach one peer.
		if kind[i] == "" || (kind[i] == inventory.LinkNVLink && k == inventory.LinkNVSwitch) {
			kind[i] = k
		}
	}
	for li, l := range n.Links {
		if l.A < 0 || l.A >= g {
			return nil, fmt.Errorf("links[%d]: GPU index %d out of range (node has %d GPUs)", li, l.A, g)
		}
		switch l.Kind {
		case inventory.LinkNVSwitch:
			if l.Switch == "" {
				return nil, fmt.Errorf("links[%d]: nvswitch link of GPU %d names no switch plane", li, l.A)
			}
			planes[l.Switch] = append(planes[l.Switch], l.A)
			setKind(l.A, l.Kind)
			bw[l.A] += l.BandwidthGBps
			unknownBW[l.A] = unknownBW[l.A] || l.BandwidthUnknown
		case inventory.LinkNVLink, inventory.LinkXGMI:
			if l.B < 0 || l.B >= g || l.B == l.A {
				return nil, fmt.Errorf("links[%d]: peer GPU index %d invalid for GPU %d (node has %d GPUs)", li, l.B, l.A, g)
			}
			adj[l.A][l.B], adj[l.B][l.A] = true, true
			setKind(l.A, l.Kind)
			setKind(l.B, l.Kind)
			bw[l.A] += l.BandwidthGBps
			bw[l.B] += l.BandwidthGBps
			for _, i := range []int{l.A, l.B} {
				unknownBW[i] = unknownBW[i] || l.BandwidthUnknown
			}
		case inventory.LinkPCIe:
			// PCIe peers share no island; pcieRoot carries that relation.
		default:
			return nil, fmt.Errorf("links[%d]: unknown link kind %q", li, l.Kind)
		}
	}
	// Everyone on one switch plane is directly connected to everyone else.
	for _, members := range planes {
		for _, a := range members {
			for _, b := range members {
				if a != b {
					adj[a][b] = true
				}
			}
		}
	}

	out := make([]Attrs, g)
	for _, island := range islands(adj) {
		id := islandID(n, island, kind[island[0]])
		for _, i := range island {
			k := kind[i]
			if k == "" {
				k = inventory.LinkPCIe
			}
			out[i] = Attrs{Kind: k, Island: id, BandwidthGBps: bw[i], Members: island}
			if unknownBW[i] {
				out[i].BandwidthGBps, out[i].BandwidthUnknown = 0, true
			}
		}
	}
	return out, nil
}

// islands partitions the graph into cliques, as the package doc describes.
func islands(adj [][]bool) [][]int {
	var out [][]int
	for _, comp := range components(adj) {
		remaining := comp
		for len(remaining) > 0 {
			best := largestClique(adj, remaining)
			out = append(out, best)
			in := map[int]bool{}
			for _, v := range best {
				in[v] = true
			}
			var rest []int
			for _, v := range remaining {
				if !in[v] {
					rest = append(rest, v)
				}
			}
			remaining = rest
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a][0] < out[b][0] })
	return out
}

func components(adj [][]bool) [][]int {
	g := len(adj)
	seen := make([]bool, g)
	var out [][]int
	for s := 0; s < g; s++ {
		if seen[s] {
			continue
		}
		var comp []int
		stack := []int{s}
		seen[s] = true
		for len(stack) > 0 {
			v := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			comp = append(comp, v)
			for w := 0; w < g; w++ {
				if adj[v][w] && !seen[w] {
					seen[w] = true
					stack = append(stack, w)
				}
			}
		}
		sort.Ints(comp)
		out = append(out, comp)
	}
	return out
}

// largestClique finds a maximum clique among vs (ascending). Components are
// small (a node has at most a few dozen GPUs), so a simple branch and bound
// search is plenty; candidates are tried in ascending order, so among equal
// sizes the lexicographically first clique wins.
func largestClique(adj [][]bool, vs []int) []int {
	var best []int
	var grow func(clique, cand []int)
	grow = func(clique, cand []int) {
		if len(clique)+len(cand) <= len(best) {
			return
		}
		if len(cand) == 0 {
			best = append([]int(nil), clique...)
			return
		}
		for i, v := range cand {
			if len(clique)+len(cand)-i <= len(best) {
				return
			}
			var next []int
			for _, w := range cand[i+1:] {
				if adj[v][w] {
					next = append(next, w)
				}
			}
			grow(append(clique, v), next)
		}
	}
	grow(nil, vs)
	return best
}

func islandID(n *inventory.Node, members []int, k inventory.LinkKind) string {
	if k == "" {
		k = inventory.LinkPCIe
	}
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = n.GPUs[m].UUID
	}
	sort.Strings(ids)
	sum := sha256.Sum256([]byte(strings.Join(ids, ",")))
	return string(k) + "-" + hex.EncodeToString(sum[:6])
}
