package sim

import "github.com/tessera-gpu/tessera/internal/inventory"

// minorSet hands out DRM minors to AMD compute partitions: each partition
// of a GPU in DPX/QPX/CPX mode is its own /dev/dri/card<N> and
// /dev/dri/renderD<M>, numbered after the whole GPUs' nodes as the amdgpu
// driver does (it registers the extra partition nodes after the GPUs).
type minorSet struct {
	cards, renders         map[int]bool
	cardFloor, renderFloor int
}

// newMinorSet collects the DRM minors the AMD GPUs and partitions of n use.
func newMinorSet(n *inventory.Node) *minorSet {
	s := &minorSet{cards: map[int]bool{}, renders: map[int]bool{}, renderFloor: 128}
	for _, g := range n.GPUs {
		if g.Vendor != inventory.VendorAMD {
			continue
		}
		s.cards[g.Minor], s.renders[g.RenderMinor] = true, true
		s.cardFloor = max(s.cardFloor, g.Minor+1)
		s.renderFloor = max(s.renderFloor, g.RenderMinor+1)
		for _, p := range g.Partitions {
			s.cards[p.Minor], s.renders[p.RenderMinor] = true, true
		}
	}
	return s
}

// take returns the lowest free card and render minors above the GPUs' own
// and marks them used.
func (s *minorSet) take() (card, render int) {
	for card = s.cardFloor; s.cards[card]; card++ {
	}
	for render = s.renderFloor; s.renders[render]; render++ {
	}
	s.cards[card], s.renders[render] = true, true
	return card, render
}
