package amdsysfs

import (
	"fmt"
	"sort"
	"strings"
)

// card is one physical GPU device (one PCI function) and the KFD nodes it
// exposes: one in SPX mode, several in DPX/QPX/CPX mode.
type card struct {
	Domain, Bus, Dev uint64
	Nodes            []*kfdNode // ordered by partition index
	PartIndex        []int      // partition index of each node
}

func (c *card) bdf() string { return bdf(c.Domain, c.Bus, c.Dev, 0) }

// locate splits a GPU node's location into its PCI device and partition
// index. location_id is pci_dev_id(), bus<<8 | dev<<3 | fn; on a card with
// several KFD nodes the kernel ORs the partition's node id into it
// (kfd_topology.c, kfd_topology_add_device: "location_id |= node_id", so
// it lands in the function bits, as the real MI308X capture shows: 2560-2563
// for 0a:00.0; one kernel revision shifted it to bits 31:28 instead, and
// both are accepted). The GPU itself is always function 0.
func locate(n *kfdNode) (domain, bus, dev uint64, part int, err error) {
	loc, ok := n.Props.Get("location_id")
	if !ok {
		return 0, 0, 0, 0, fmt.Errorf("KFD node %d: properties have no location_id", n.ID)
	}
	if loc>>32 != 0 {
		return 0, 0, 0, 0, fmt.Errorf("KFD node %d: location_id %d is out of range", n.ID, loc)
	}
	domain, _ = n.Props.Get("domain") // absent before kernel 4.19: domain 0
	if domain > 0xffff {
		return 0, 0, 0, 0, fmt.Errorf("KFD node %d: PCI domain %d is out of range", n.ID, domain)
	}
	if hi := loc >> 16; hi != 0 {
		part = int(hi >> 12)
	} else {
		part = int(loc & 7)
	}
	return domain, loc >> 8 & 0xff, loc >> 3 & 0x1f, part, nil
}

// groupCards groups GPU nodes by PCI device, in PCI order.
func groupCards(nodes []*kfdNode) (cards []*card, bad []error) {
	byKey := map[[3]uint64]*card{}
	for _, n := range nodes {
		if !n.isGPU() {
			continue
		}
		d, b, dv, part, err := locate(n)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		k := [3]uint64{d, b, dv}
		c := byKey[k]
		if c == nil {
			c = &card{Domain: d, Bus: b, Dev: dv}
			byKey[k] = c
			cards = append(cards, c)
		}
		c.Nodes = append(c.Nodes, n)
		c.PartIndex = append(c.PartIndex, part)
	}
	for _, c := range cards {
		sort.Sort(byPart{c})
	}
	sort.Slice(cards, func(i, j int) bool {
		a, b := cards[i], cards[j]
		if a.Domain != b.Domain {
			return a.Domain < b.Domain
		}
		if a.Bus != b.Bus {
			return a.Bus < b.Bus
		}
		return a.Dev < b.Dev
	})
	return cards, bad
}

type byPart struct{ c *card }

func (s byPart) Len() int { return len(s.c.Nodes) }
func (s byPart) Less(i, j int) bool {
	if s.c.PartIndex[i] != s.c.PartIndex[j] {
		return s.c.PartIndex[i] < s.c.PartIndex[j]
	}
	return s.c.Nodes[i].ID < s.c.Nodes[j].ID
}
func (s byPart) Swap(i, j int) {
	s.c.Nodes[i], s.c.Nodes[j] = s.c.Nodes[j], s.c.Nodes[i]
	s.c.PartIndex[i], s.c.PartIndex[j] = s.c.PartIndex[j], s.c.PartIndex[i]
}

// computeMode names a card's compute partition mode. amdgpu's
// current_compute_partition says it where the PCI directory was captured;
// otherwise it follows from the KFD nodes: one node is SPX, one XCC per
// node is CPX, and 2 or 4 nodes of several XCCs are DPX or QPX (ROCm
// "GPU partitioning" for MI300: SPX 1, DPX 2, QPX 4, CPX one per XCD).
//
// A current_compute_partition that disagrees with the KFD nodes (SPX with
// eight nodes: a mode switch half done, or a bad read) is reported and the
// nodes win: they are the partitions that exist.
func computeMode(pci pciInfo, nodes []*kfdNode, warn func(string, ...any)) string {
	derived, pm := modeOfNodes(nodes), pci.ComputeMode
	switch {
	case pm == "" || pm == derived:
		return derived
	case nodesOfMode[pm] == len(nodes), pm == "CPX" && strings.HasSuffix(derived, "XCP"):
		return pm // KFD's nodes lack num_xcc; the file is the better name
	}
	warn("current_compute_partition says %s but KFD lists %d partition(s) of this GPU: published as %s", pm, len(nodes), derived)
	return derived
}

// nodesOfMode is how many KFD nodes (partitions) a mode other than CPX
// has; CPX has one per XCD, which differs by GPU.
var nodesOfMode = map[string]int{"SPX": 1, "DPX": 2, "TPX": 3, "QPX": 4}

// modeOfNodes names the compute partition mode from the KFD nodes alone.
func modeOfNodes(nodes []*kfdNode) string {
	if len(nodes) == 1 {
		return "SPX"
	}
	if xcc, _ := nodes[0].Props.Get("num_xcc"); xcc == 1 {
		return "CPX"
	}
	switch len(nodes) {
	case 2:
		return "DPX"
	case 4:
		return "QPX"
	}
	return fmt.Sprintf("%dXCP", len(nodes))
}
