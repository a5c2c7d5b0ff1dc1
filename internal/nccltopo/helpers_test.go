package nccltopo

import (
	"testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/sim"
)

func machine(t testing.TB, name string) *inventory.Node {
	t.Helper()
	m, err := sim.Profile(name, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	return &m.Node
}

// wholeByVendor lists a node's whole GPUs (not in partition mode) by vendor,
// vendors in order of first appearance.
func wholeByVendor(n *inventory.Node) ([]inventory.Vendor, map[inventory.Vendor][]int) {
	var order []inventory.Vendor
	out := map[inventory.Vendor][]int{}
	for i, g := range n.GPUs {
		if g.Partitioning != nil && g.Partitioning.Enabled {
			continue
		}
		if _, ok := out[g.Vendor]; !ok {
			order = append(order, g.Vendor)
		}
		out[g.Vendor] = append(out[g.Vendor], i)
	}
	return order, out
}

func dialectOf(v inventory.Vendor) Dialect {
	if v == inventory.VendorAMD {
		return RCCL
	}
	return NCCL
}
