package amdsysfs

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/pci"
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
//
// The PCI domain is KFD's `domain` property. Kernels before 4.19 have none,
// and then GPUs in two PCI domains at one bus and device would look alike:
// the domain is taken from the device sysfs hangs the node's render node on
// (drmAddress) where its bus and device are KFD's, else it is 0 and
// domainKnown false (groupCards says so if that leaves two GPUs alike).
func locate(r fsRoot, n *kfdNode) (domain, bus, dev uint64, part int, domainKnown bool, err error) {
	loc, ok := n.Props.Get("location_id")
	if !ok {
		return 0, 0, 0, 0, false, fmt.Errorf("KFD node %d: properties have no location_id", n.ID)
	}
	if loc>>32 != 0 {
		return 0, 0, 0, 0, false, fmt.Errorf("KFD node %d: location_id %d is out of range", n.ID, loc)
	}
	bus, dev = loc>>8&0xff, loc>>3&0x1f
	domain, domainKnown = n.Props.Get("domain")
	if !domainKnown {
		if id, ok := drmAddress(r, n); ok && uint64(id.Bus) == bus && uint64(id.Dev) == dev {
			domain, domainKnown = uint64(id.Domain), true
		}
	}
	if domain > 0xffff {
		return 0, 0, 0, 0, false, fmt.Errorf("KFD node %d: PCI domain %d is out of range", n.ID, domain)
	}
	if hi := loc >> 16; hi != 0 {
		part = int(hi >> 12)
	} else {
		part = int(loc & 7)
	}
	return domain, bus, dev, part, domainKnown, nil
}

// drmAddress is the PCI address of the device that carries KFD node n's
// render node: /sys/class/drm/renderD<minor> links to
// <device>/drm/renderD<minor>, and a PCI device's directory is named by its
// extended BDF. ok=false where sysfs does not say (a KFD-only capture, the
// amdgpu_xcp platform device of a partition).
func drmAddress(r fsRoot, n *kfdNode) (pci.BusID, bool) {
	minor, ok := n.Props.Get("drm_render_minor")
	if !ok || minor < 128 || minor > 1<<20 {
		return pci.BusID{}, false
	}
	rel, err := r.resolve(fmt.Sprintf("sys/class/drm/renderD%d", minor))
	if err != nil {
		return pci.BusID{}, false
	}
	id, err := pci.ParseBusID(path.Base(path.Dir(path.Dir(rel))))
	return id, err == nil
}

// groupCards groups GPU nodes by PCI device, in PCI order.
//
// Partitions of one card share its PCI address and differ in their
// partition index (locate). Two nodes at one address with one partition
// index are two GPUs nothing tells apart (KFD without PCI domains, and no
// sysfs DRM entry to name them): merged they would be one GPU with the
// compute units and memory of both, and either one's PCI address would be
// a guess. All the nodes at that address are left out, as ambiguous, and
// said: publishing a GPU under another's address (its health, its NUMA
// node, its device nodes) would be worse than not publishing it.
func groupCards(r fsRoot, nodes []*kfdNode) (cards []*card, bad []error) {
	byKey := map[[3]uint64]*card{}
	noDomain := map[[3]uint64]bool{}
	for _, n := range nodes {
		if !n.isGPU() {
			continue
		}
		d, b, dv, part, domainKnown, err := locate(r, n)
		if err != nil {
			bad = append(bad, &nodeError{node: n.ID, reason: inventory.UnpublishedUnreadable, err: err})
			continue
		}
		k := [3]uint64{d, b, dv}
		noDomain[k] = noDomain[k] || !domainKnown
		c := byKey[k]
		if c == nil {
			c = &card{Domain: d, Bus: b, Dev: dv}
			byKey[k] = c
			cards = append(cards, c)
		}
		c.Nodes = append(c.Nodes, n)
		c.PartIndex = append(c.PartIndex, part)
	}
	kept := cards[:0]
	for _, c := range cards {
		sort.Sort(byPart{c})
		if errs := ambiguous(c, noDomain[[3]uint64{c.Domain, c.Bus, c.Dev}]); errs != nil {
			bad = append(bad, errs...)
			continue
		}
		kept = append(kept, c)
	}
	cards = kept
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

// ambiguous returns, for a card (sorted by partition) on which two nodes
// have one partition index, why each of its nodes is left out; nil when
// every index is its own.
func ambiguous(c *card, noDomain bool) []error {
	dup := -1
	for i := 1; i < len(c.Nodes); i++ {
		if c.PartIndex[i] == c.PartIndex[i-1] {
			dup = c.PartIndex[i]
			break
		}
	}
	if dup < 0 {
		return nil
	}
	ids := make([]int, len(c.Nodes))
	for i, n := range c.Nodes {
		ids[i] = n.ID
	}
	why := "nothing in KFD or sysfs tells them apart"
	if noDomain {
		why = "KFD gives no PCI domain (properties without domain: kernels before 4.19) and sysfs names no DRM device for them, so GPUs in two PCI domains cannot be told apart"
	}
	out := make([]error, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = &nodeError{node: n.ID, reason: inventory.UnpublishedAmbiguous,
			err: fmt.Errorf("KFD node %d: KFD nodes %v all report PCI address %s, two of them partition index %d; %s: all left out rather than merged into one GPU with their compute units and memory added up", n.ID, ids, c.bdf(), dup, why)}
	}
	return out
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
