package amdsysfs

import (
	"sort"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// xgmiLinks turns KFD's xGMI io_links and p2p_links into inventory links
// between cards. owner maps a KFD node ID to its GPU index in the
// inventory.
//
// Every xGMI link between two GPU nodes of the same hive (equal, nonzero
// hive_id) is an edge, whatever its bandwidth: KFD lists all hive peers,
// and reports max_bandwidth 0 where it does not know the link count (the
// cross-card links of partitioned MI300s in the real MI308X capture, and
// peers reached through another GPU), yet those peers do reach each other
// over xGMI. Links between partitions of one card are not edges.
//
// Bandwidth: KFD's max_bandwidth is MB/s (amdgpu_amdkfd_get_xgmi_bandwidth_mbytes:
// links x lanes x Mbit/s / 8; the real MI210 capture shows 50000 per link,
// x16 at 25 Gbit/s; its PCIe links 64000 = Gen5 x16, 32 GT/s x 16 / 8), so
// GB/s is max_bandwidth / 1000. Each direction is listed separately with
// the same value; an edge keeps the largest value seen for the pair. Which
// of the 0s are unknown is unknownBandwidth's to say; the GPUs it leaves
// with an unknown fabric bandwidth come back with why.
func xgmiLinks(nodes []*kfdNode, owner map[int]int) ([]inventory.Link, map[int]string) {
	byID := map[int]*kfdNode{}
	for _, n := range nodes {
		byID[n.ID] = n
	}
	type pair struct{ a, b int }
	bw := map[pair]int64{}
	for _, n := range nodes {
		a, ok := owner[n.ID]
		if !ok {
			continue
		}
		hive, _ := n.Props.Get("hive_id")
		if hive == 0 {
			continue
		}
		for _, l := range n.Links {
			if t, _ := l.Get("type"); t != ioLinkTypeXGMI {
				continue
			}
			to, _ := l.Get("node_to")
			peer := byID[int(to)]
			b, ok := owner[int(to)]
			if peer == nil || !ok || a == b {
				continue
			}
			if h, _ := peer.Props.Get("hive_id"); h != hive {
				continue
			}
			k := pair{min(a, b), max(a, b)}
			mb, _ := l.Get("max_bandwidth")
			gb := int64(mb / 1000)
			if cur, seen := bw[k]; !seen || gb > cur {
				bw[k] = gb
			}
		}
	}
	out := make([]inventory.Link, 0, len(bw))
	for k, v := range bw {
		out = append(out, inventory.Link{Kind: inventory.LinkXGMI, A: k.a, B: k.b, BandwidthGBps: v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].A != out[j].A {
			return out[i].A < out[j].A
		}
		return out[i].B < out[j].B
	})
	return out, unknownBandwidth(out)
}

// unknownBandwidth marks the xGMI edges whose 0 is unknown rather than
// none, and returns the GPUs that have one, with why.
//
// KFD reports max_bandwidth 0 for two different things
// (kfd_crat.c, kfd_fill_gpu_xgmi_link_to_gpu, and
// amdgpu_amdkfd_get_xgmi_bandwidth_mbytes): a peer reached only through
// another GPU ("num links returns 0 for indirect peers"), which adds
// nothing to a GPU's own links, and a link whose count the kernel does not
// know: every cross-card link of a card in a multi-partition mode (the
// real MI308X capture: weight 41, bandwidth 0) and every link before
// gfx90a. Every GPU of a hive has at least one direct link, so a GPU whose
// every xGMI edge reads 0 has links of unknown width, not none; where a
// GPU has some edges of known width, its 0s are indirect peers (MI250X:
// 200 GB/s to its sibling die, 50 to one peer, 0 to the rest). An edge
// with a 0 is unknown when either end reads nothing but 0s; its GPUs then
// publish no fabricBandwidthGBps rather than a sum that is too low.
func unknownBandwidth(links []inventory.Link) map[int]string {
	known := map[int]bool{}
	for _, l := range links {
		if l.Kind == inventory.LinkXGMI && l.BandwidthGBps > 0 {
			known[l.A], known[l.B] = true, true
		}
	}
	out := map[int]string{}
	for i := range links {
		l := &links[i]
		if l.Kind != inventory.LinkXGMI || l.BandwidthGBps > 0 || (known[l.A] && known[l.B]) {
			continue
		}
		l.BandwidthUnknown = true
		for _, g := range []int{l.A, l.B} {
			if !known[g] {
				out[g] = "KFD reports max_bandwidth 0 on every xGMI link of this GPU (the kernel does not know their link count: a card in a multi-partition mode, or a GPU before gfx90a)"
			} else if _, ok := out[g]; !ok {
				out[g] = "KFD reports max_bandwidth 0 on an xGMI link to a GPU whose every link reads 0, so that link's width is unknown"
			}
		}
	}
	return out
}

// pairDies sets CardID on multi-die cards. An MI250/MI250X card carries two
// GCDs, each its own PCI device and KFD node; what ties them is the
// in-package xGMI connection of four links, wider than any link between
// cards (one or two links: ROCm "AMD Instinct MI250 microarchitecture").
// Each GCD's partner is its peer with the widest xGMI link, accepted only
// when the choice is mutual and the link is wider than every other link of
// both, so an ambiguous topology leaves CardID empty rather than wrong.
func pairDies(gpus []inventory.GPU, links []inventory.Link) {
	type best struct {
		peer   int
		bw     int64
		second int64
	}
	b := make([]best, len(gpus))
	for i := range b {
		b[i].peer = -1
	}
	note := func(a, p int, v int64) {
		switch {
		case v > b[a].bw:
			b[a].second = b[a].bw
			b[a].peer, b[a].bw = p, v
		case v > b[a].second:
			b[a].second = v
		}
	}
	for _, l := range links {
		if l.Kind != inventory.LinkXGMI {
			continue
		}
		if !multiDie(gpus[l.A]) || !multiDie(gpus[l.B]) {
			continue
		}
		note(l.A, l.B, l.BandwidthGBps)
		note(l.B, l.A, l.BandwidthGBps)
	}
	for i := range gpus {
		p := b[i].peer
		if p < 0 || b[p].peer != i || b[i].bw <= b[i].second || b[p].bw <= b[p].second {
			continue
		}
		lo := min(i, p)
		gpus[i].CardID = gpus[lo].PCIBusID
	}
}

// multiDie reports models whose cards carry two GCDs.
func multiDie(g inventory.GPU) bool { return g.Model == "MI250X" || g.Model == "MI250" }
