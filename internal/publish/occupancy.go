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
// that exist, puts first the one device of each profile that first fit
// would take, then the other free placements, then the placements nothing
// can use until a partition goes. Among one profile's free devices the
// order is rule 5's, so a claim for one profile gets the device it got
// before; a claim for a larger profile finds its placement after at most
// one device of each smaller profile instead of all of them.

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
	tierFirst   = 1 // the first free placement of its profile
	tierFree    = 2 // the other free placements
	tierBlocked = 3 // placements the partitions that exist overlap (and those partitions)
)

// tierPlacements ranks the dynamic placements of items, which are in
// sortItems order; sortItems then puts them in tier order.
func tierPlacements(items []item) {
	type key struct {
		parent  int
		profile string
	}
	seen := map[key]bool{}
	for i := range items {
		it := &items[i]
		if it.group != groupPlacement || it.placeholder {
			continue
		}
		k := key{it.parent, it.entry.Carve.Profile}
		switch {
		case it.blocked:
			it.tier = tierBlocked
		case !seen[k]:
			it.tier, seen[k] = tierFirst, true
		default:
			it.tier = tierFree
		}
	}
}
