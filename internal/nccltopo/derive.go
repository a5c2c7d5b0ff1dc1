package nccltopo

import (
	"github.com/tessera-gpu/tessera/internal/gpuvendor"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// The figures below are not in the inventory; they are derived from what
// is (architecture, compute capability, gfx version, link bandwidth) and
// are listed as derived in docs/training.md.

// pcieGen is the PCIe generation of a GPU's host link by architecture.
var pcieGen = map[string]int{
	"pascal": 3, "volta": 3, "turing": 3,
	"ampere": 4, "ada": 4, "hopper": 5, "blackwell": 5,
	"cdna": 4, "cdna2": 4, "cdna3": 5,
}

// linkSpeed is the link_speed value, as Linux writes max_link_speed, of a
// PCIe generation; an unknown architecture gets Gen4, NCCL's own guess
// when /sys says nothing being Gen3.
func linkSpeed(arch string) string {
	switch pcieGen[arch] {
	case 3:
		return "8.0 GT/s PCIe"
	case 5:
		return "32.0 GT/s PCIe"
	default:
		return "16.0 GT/s PCIe"
	}
}

// linkWidth of every GPU and switch link: x16, the width of every GPU in
// the catalogue.
const linkWidth = 16

// linkCount is how many links make up bw GB/s from g, at least one, each
// carrying the vendor's per-link bandwidth (gpuvendor.Collective.LinkGBps).
func linkCount(c gpuvendor.Collective, g *inventory.GPU, bw int64) int {
	per := c.LinkGBps(g)
	n := int((bw + per/2) / per)
	return max(n, 1)
}
