package publish

import (
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/gpuvendor/vendors"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// Partition modes as counters (docs/partitioning.md, "Dynamic AMD compute
// partitions").
//
// Where a GPU's partitions are a mode of the whole GPU
// (gpuvendor.Capabilities.PartitionModes: AMD's SPX, DPX, QPX, CPX), two
// partitions of different modes can never exist at once, nor a partition
// beside the whole GPU. The allocator learns that only from the counters
// devices consume, and counters add up: with one counter per XCD, a DPX
// half on XCDs 0-3 and a CPX partition on XCD 4 would both fit. No counter
// of which every partition of a mode takes the same amount can keep two
// modes of two or more partitions apart: with capacity C, n ≥ 2 partitions
// of one mode taking α each and m ≥ 2 of another taking β each, each mode
// fitting whole means α ≤ C/2 and β ≤ C/2, so one of each always fits.
//
// Tokens do it. Let a ≤ b be the partition counts of the two modes with the
// most partitions (a = 1 where there is only one such mode). The counters
// are the a·b tokens (z, y), z < a, y < b, each of capacity 1. Partition y
// of the mode of b partitions takes column y, partition z of the mode of a
// takes row z, and partition x of any other mode, of c ≤ a partitions,
// takes the diagonal class {(z, y) : (z+y) mod c = x}. Within a mode the
// sets are disjoint, so all of a mode's partitions fit together; a row and
// a column always cross, and a row or a column holds c consecutive values
// of z+y and so meets every class; two classes of c1 and c2 partitions meet
// where the sum range reaches a solution of both congruences, which
// modePlan checks rather than assumes. The whole GPU takes every token. An
// MI300X (DPX 2, QPX 4, CPX 8) has 32 tokens, the API's limit both per
// counter set and per device consumption (MaxCountersPerSet); a GPU whose
// modes need more, or whose classes do not all meet, is published by its
// current mode, with the reason logged (GPUMode.Reason).

// modal reports whether g's partitions are a mode of the whole GPU.
func modal(g *inventory.GPU) bool {
	return g.Partitioning != nil && vendors.Capabilities(g.Vendor).PartitionModes
}

// IsModal reports whether g's partitions are a mode of the whole GPU
// (gpuvendor.Capabilities.PartitionModes): the agent makes them by setting
// the mode, not by carving each one.
func IsModal(g *inventory.GPU) bool { return modal(g) }

// partitionCount is how many partitions mode pr makes.
func partitionCount(pr *inventory.PartitionProfile) int { return len(pr.Placements) }

// wholeMode is the mode of g that is the whole GPU (one partition), nil
// where the memory mode does not allow it now.
func wholeMode(pt *inventory.Partitioning) *inventory.PartitionProfile {
	for i := range pt.Profiles {
		if partitionCount(&pt.Profiles[i]) == 1 {
			return &pt.Profiles[i]
		}
	}
	return nil
}

// RestMode is the mode a GPU whose partitions are a mode goes back to once
// no claim holds one of them: the available mode with the fewest
// partitions, which is SPX (the whole GPU) where the memory mode allows it.
// "" for a GPU without modes.
func RestMode(g *inventory.GPU) string {
	if !modal(g) || len(g.Partitioning.Profiles) == 0 {
		return ""
	}
	pt := g.Partitioning
	rest := &pt.Profiles[0]
	for i := range pt.Profiles {
		if partitionCount(&pt.Profiles[i]) < partitionCount(rest) {
			rest = &pt.Profiles[i]
		}
	}
	return rest.Name
}

// wholeOffered reports whether a dynamic GPU publishes its whole GPU: a
// GPU of modes where its whole mode is available, a MIG GPU unless MIG
// mode is on for good (its change needs a reset).
func wholeOffered(g *inventory.GPU) bool {
	pt := g.Partitioning
	if modal(g) {
		return wholeMode(pt) != nil
	}
	return !pt.ModeChangeNeedsReset || !pt.Enabled
}

// wholeModeProfile reports whether pr is g's whole mode: its one placement
// is the whole GPU's device, not a placement of its own.
func wholeModeProfile(g *inventory.GPU, pr *inventory.PartitionProfile) bool {
	return modal(g) && partitionCount(pr) == 1
}

// staticModes says why a GPU of modes cannot be published dynamically; ""
// when it can (and for a GPU without modes).
func staticModes(g *inventory.GPU) string {
	if !modal(g) || len(g.Partitioning.Profiles) == 0 {
		return ""
	}
	pt := g.Partitioning
	switch {
	case len(pt.Profiles) < 2:
		return fmt.Sprintf("only mode %s can be set%s: published by its current mode", modeNames(pt), underMemoryMode(pt))
	case pt.Mode == "":
		return "its current partition mode is unknown: published as it is"
	case pt.Profile(pt.Mode) == nil:
		return fmt.Sprintf("it is in mode %s, which is not among the modes it can be set to now (%s)%s: published as it is", pt.Mode, modeNames(pt), underMemoryMode(pt))
	}
	if _, err := planCounters(g); err != nil {
		return fmt.Sprintf("%v: published by its current mode", err)
	}
	return ""
}

func modeNames(pt *inventory.Partitioning) string {
	var out []string
	for _, pr := range pt.Profiles {
		out = append(out, pr.Name)
	}
	return strings.Join(out, ", ")
}

func underMemoryMode(pt *inventory.Partitioning) string {
	if pt.MemoryMode == "" {
		return ""
	}
	return " under memory mode " + pt.MemoryMode
}

// ModeTokenPrefix starts the name of every mode token counter, so that
// tools (kubectl tessera explain) tell a mode conflict from a lack of room.
const ModeTokenPrefix = "mode-"

// modeToken names token (z, y).
func modeToken(z, y int) string { return fmt.Sprintf("%s%d-%d", ModeTokenPrefix, z, y) }

// ModeTokens returns, for GPU g of modes, each mode's partitions' token
// sets as bit masks over the a·b tokens (bit z·b+y), by mode and
// partition in placement order, and the number of tokens: the
// construction of the package's counters, for tests and the docs.
func ModeTokens(g *inventory.GPU) (map[string][]uint64, int, error) {
	masks, n, _, err := modeMasks(g)
	return masks, n, err
}

// modeMasks builds the token grid of g's modes: each mode of two or more
// partitions gets a mask per partition, in placement order.
func modeMasks(g *inventory.GPU) (masks map[string][]uint64, tokens, b int, err error) {
	pt := g.Partitioning
	var modes []*inventory.PartitionProfile
	for i := range pt.Profiles {
		if partitionCount(&pt.Profiles[i]) >= 2 {
			modes = append(modes, &pt.Profiles[i])
		}
	}
	if len(modes) == 0 {
		return nil, 0, 0, fmt.Errorf("GPU %s: no mode of two or more partitions (modes: %s)", g.UUID, modeNames(pt))
	}
	sort.SliceStable(modes, func(i, j int) bool { return partitionCount(modes[i]) > partitionCount(modes[j]) })
	b = partitionCount(modes[0])
	a := 1
	if len(modes) > 1 {
		a = partitionCount(modes[1])
	}
	if a*b > MaxCountersPerSet {
		return nil, 0, 0, fmt.Errorf("GPU %s: modes of %d and %d partitions (%s) need %d counters, a counter set holds %d", g.UUID, a, b, modeNames(pt), a*b, MaxCountersPerSet)
	}
	masks = map[string][]uint64{}
	for mi, pr := range modes {
		c := partitionCount(pr)
		m := make([]uint64, c)
		for z := range a {
			for y := range b {
				bit := uint64(1) << (z*b + y)
				switch mi {
				case 0:
					m[y] |= bit
				case 1:
					m[z] |= bit
				default:
					m[(z+y)%c] |= bit
				}
			}
		}
		masks[pr.Name] = m
	}
	if err := checkModeMasks(masks); err != nil {
		return nil, 0, 0, fmt.Errorf("GPU %s: %w", g.UUID, err)
	}
	return masks, a * b, b, nil
}

// checkModeMasks is the construction's proof, for the modes at hand:
// every partition takes a token, two partitions of one mode share none, and
// two of different modes share at least one.
func checkModeMasks(masks map[string][]uint64) error {
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range masks {
			if !yield(n) {
				return
			}
		}
	})
	for i, n := range names {
		for x, mx := range masks[n] {
			if mx == 0 {
				return fmt.Errorf("partition %d of mode %s takes no counter", x, n)
			}
			for y := x + 1; y < len(masks[n]); y++ {
				if mx&masks[n][y] != 0 {
					return fmt.Errorf("partitions %d and %d of mode %s share a counter", x, y, n)
				}
			}
		}
		for _, o := range names[i+1:] {
			for x, mx := range masks[n] {
				for y, my := range masks[o] {
					if mx&my == 0 {
						return fmt.Errorf("partition %d of mode %s and partition %d of mode %s share no counter, so both would fit: no counters of %d or fewer keep modes %s apart", x, n, y, o, MaxCountersPerSet, strings.Join(names, ", "))
					}
				}
			}
		}
	}
	return nil
}

// newModePlan is the counter plan of a GPU of modes: the tokens, and what
// each partition of each mode takes (by placement start).
func newModePlan(g *inventory.GPU) (*counterPlan, error) {
	masks, n, b, err := modeMasks(g)
	if err != nil {
		return nil, err
	}
	plan := &counterPlan{capacity: map[string]int64{}, modes: map[string]map[int]map[string]resourceapi.Counter{}}
	for k := range n {
		name := modeToken(k/b, k%b)
		plan.names = append(plan.names, name)
		plan.capacity[name] = 1
	}
	pt := g.Partitioning
	for i := range pt.Profiles {
		pr := &pt.Profiles[i]
		m, ok := masks[pr.Name]
		if !ok {
			continue // the whole mode: the whole GPU takes everything
		}
		starts := map[int]map[string]resourceapi.Counter{}
		pls := slices.Clone(pr.Placements)
		sort.Slice(pls, func(x, y int) bool { return pls[x].Start < pls[y].Start })
		for x, pl := range pls {
			use := map[string]resourceapi.Counter{}
			for mask := m[x]; mask != 0; mask &= mask - 1 {
				k := bits.TrailingZeros64(mask)
				use[modeToken(k/b, k%b)] = counter(1)
			}
			starts[pl.Start] = use
		}
		plan.modes[pr.Name] = starts
	}
	return plan, nil
}

// modeConsumption is what the partition of mode pr at pl takes; a mode or
// placement the table lacks (a partition of a mode the GPU cannot be set to
// now) takes every token, so it blocks the GPU rather than nothing.
func (c *counterPlan) modeConsumption(pr *inventory.PartitionProfile, pl inventory.Placement) map[string]resourceapi.Counter {
	if pr != nil {
		if use, ok := c.modes[pr.Name][pl.Start]; ok {
			out := make(map[string]resourceapi.Counter, len(use))
			for k, v := range use {
				out[k] = v
			}
			return out
		}
	}
	return c.all()
}

// modeFree is what of g's counters the partitions that exist leave for
// placements to fit in. On a GPU of modes a partition nobody holds is no
// obstacle: the agent changes the mode of a GPU no claim holds, so every
// mode's partitions can be had (and none is withheld: withhold). Held
// partitions block the other modes' placements, which are left out until
// the GPU is idle again; held nil counts every partition as held (the
// build before the checkpoint is read). Elsewhere it is free's.
func modeFree(plan *counterPlan, g *inventory.GPU, held func(string, *inventory.Partition) bool) map[string]int64 {
	if !modal(g) || held == nil {
		return free(plan, g)
	}
	avail := maps.Clone(plan.capacity)
	for i := range g.Partitions {
		p := &g.Partitions[i]
		if !held(g.UUID, p) {
			continue
		}
		for name, use := range plan.consumption(g.Partitioning.Profile(p.Profile), p.Placement) {
			avail[name] -= use.Value.Value()
		}
	}
	return avail
}

// AttrPartitionMode is the compute partition mode a GPU of modes is in now
// (SPX, DPX, QPX, CPX), on its whole GPU's device where it is published
// dynamically: what `inventory` shows, and a selector can ask for a GPU
// already in a mode. A partition's own mode is its profile.
const AttrPartitionMode = "partitionMode"

// addModeAttributes adds to d, the whole device of g, the GPU's current
// compute and memory partition modes, where g's partitions are a mode.
func addModeAttributes(d *resourceapi.Device, g *inventory.GPU) {
	if !modal(g) {
		return
	}
	if d.Attributes == nil {
		d.Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}
	}
	a := attrs(d.Attributes)
	a.str(AttrPartitionMode, g.Partitioning.Mode)
	a.str(AttrMemoryPartition, g.Partitioning.MemoryMode)
}
