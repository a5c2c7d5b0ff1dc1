package publish

import (
	"maps"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// Occupancy order (package doc, rules 6 and 7). The allocator evaluates
// CEL on every device it scans before the first fit and on every device of
// a node where nothing fits, so what it scans decides a node's scheduling
// cost. Within a dynamic GPU's slice the agent, which knows the partitions
// that exist, puts first every free placement of the GPU's smallest profile,
// then the one device of each other profile that first fit would take,
// then the other free placements, then the placements nothing can use
// until a partition goes. Among one profile's free devices the order is
// rule 5's, so a claim for one profile gets the device it got before.
//
// The smallest profile is the one claims ask for many of on one GPU (seven
// 1g.10gb on an H100, eight CPX on an MI300X), and the scheduler allocates
// many of them between two republishes of the agent: with only its first
// placement ahead, the second 1g.10gb claim on a GPU scanned the six first
// placements of the other profiles (a CEL evaluation each for the class
// and the request) before the next 1g.10gb; now it scans none. A claim for
// a larger profile finds its placement after the smallest profile's free
// placements and at most one device of each other smaller profile.

// free returns what of g's counters no partition that exists takes:
// counters of the plan minus what every partition of g consumes.
func free(plan *counterPlan, g *inventory.GPU) map[string]int64 {
	avail := maps.Clone(plan.capacity)
	for i := range g.Partitions {
		p := &g.Partitions[i]
		for name, use := range plan.consumption(g.Partitioning.Profile(p.Profile), p.Placement) {
			avail[name] -= use.Value.Value()
		}
	}
	return avail
}

// fits reports whether a placement consuming use fits in avail.
func fits(use map[string]resourceapi.Counter, avail map[string]int64) bool {
	for name, c := range use {
		if c.Value.Value() > avail[name] {
			return false
		}
	}
	return true
}

// Placement tiers within a GPU.
const (
	tierSmallest = 1 // the free placements of the GPU's smallest profile
	tierFirst    = 2 // the first free placement of another profile
	tierFree     = 3 // the other free placements
	tierBlocked  = 4 // placements the partitions that exist overlap (and those partitions)
)

// tierPlacements ranks the dynamic placements of items, which are in
// sortItems order; sortItems then puts them in tier order.
func tierPlacements(items []item) {
	type key struct {
		parent  int
		profile string
	}
	seen := map[key]bool{}
	smallest := map[int]string{} // by parent: the profile of its first placement
	for i := range items {
		it := &items[i]
		if it.group != groupPlacement || it.placeholder {
			continue
		}
		k := key{it.parent, it.entry.Carve.Profile}
		if _, ok := smallest[it.parent]; !ok {
			smallest[it.parent] = k.profile
		}
		switch {
		case it.blocked:
			it.tier = tierBlocked
		case smallest[it.parent] == k.profile:
			it.tier = tierSmallest
		case !seen[k]:
			it.tier, seen[k] = tierFirst, true
		default:
			it.tier = tierFree
		}
	}
}
