package publish

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// API limits on counters (k8s.io/api/resource/v1).
const (
	MaxCounterSetsPerSlice = resourceapi.ResourceSliceMaxCounterSets
	MaxCountersPerSet      = resourceapi.ResourceSliceMaxCountersPerCounterSet
)

// counterPlan is the shared counter set of one partitionable GPU: what the
// GPU has and what each profile placement takes from it.
//
// Every memory slice is a counter of 1 ("memory-slice-<k>"), so a placement
// consumes exactly the slices it covers and the allocator can never hand out
// two placements that overlap. The vendor's other limits (compute slices,
// engines such as the one OFA a +me profile takes, per-profile instance
// caps) become counters only where they bind: a limit that no set of
// non-overlapping placements can exceed would cost the scheduler time on
// every device and change nothing (docs/design.md), so it is left out.
type counterPlan struct {
	names    []string // in publishing order
	capacity map[string]int64
	extras   []candidate // the binding limits beyond memory slices
	// modes, on a GPU whose partitions are a mode of the whole GPU, is
	// what each partition takes instead of memory slices, by mode and
	// placement start (modes.go).
	modes map[string]map[int]map[string]resourceapi.Counter
}

// candidate is a limit that may become a counter.
type candidate struct {
	name string
	cap  int64
	use  func(pr *inventory.PartitionProfile) int64
}

// consumption returns the counters a placement of pr at pl takes; with pr
// nil (a profile the table lacks), only its memory slices.
func (c *counterPlan) consumption(pr *inventory.PartitionProfile, pl inventory.Placement) map[string]resourceapi.Counter {
	if c.modes != nil {
		return c.modeConsumption(pr, pl)
	}
	out := map[string]resourceapi.Counter{}
	for k := pl.Start; k < pl.Start+pl.Size; k++ {
		out[memorySliceCounter(k)] = counter(1)
	}
	if pr == nil {
		return out
	}
	for _, x := range c.extras {
		if v := x.use(pr); v > 0 {
			out[x.name] = counter(v)
		}
	}
	return out
}

// all is the whole GPU's consumption: every counter at full capacity.
func (c *counterPlan) all() map[string]resourceapi.Counter {
	out := make(map[string]resourceapi.Counter, len(c.names))
	for _, n := range c.names {
		out[n] = counter(c.capacity[n])
	}
	return out
}

func counter(v int64) resourceapi.Counter {
	return resourceapi.Counter{Value: *resource.NewQuantity(v, resource.DecimalSI)}
}

func memorySliceCounter(k int) string { return fmt.Sprintf("memory-slice-%d", k) }

// plans caches counter plans by profile table: every GPU of a model has the
// same one, and a fleet benchmark builds thousands of nodes.
var plans sync.Map // string -> *counterPlan

// planCounters returns the counter plan of g, whose Partitioning is set.
func planCounters(g *inventory.GPU) (*counterPlan, error) {
	key := planKey(g)
	if p, ok := plans.Load(key); ok {
		return p.(*counterPlan), nil
	}
	newPlan := newCounterPlan
	if modal(g) {
		newPlan = newModePlan
	}
	p, err := newPlan(g)
	if err != nil {
		return nil, err
	}
	plans.Store(key, p)
	return p, nil
}

func planKey(g *inventory.GPU) string {
	var b strings.Builder
	pt := g.Partitioning
	fmt.Fprintf(&b, "%s/%v/%d/%d/%v|", pt.Kind, modal(g), pt.MemorySlices, pt.ComputeSlices, sortedEngines(g.Engines))
	for _, pr := range pt.Profiles {
		fmt.Fprintf(&b, "%s/%d/%d/%d/%v/%v|", pr.Name, pr.MemorySlices, pr.ComputeSlices, pr.MaxInstances, sortedEngines(pr.Engines), pr.Placements)
	}
	return b.String()
}

func sortedEngines(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(out)
	return out
}

// maxEnumeratedSets bounds the search for binding limits; a table with more
// non-overlapping placement sets than this keeps every limit (always safe).
const maxEnumeratedSets = 1 << 18

func newCounterPlan(g *inventory.GPU) (*counterPlan, error) {
	pt := g.Partitioning
	if pt.MemorySlices <= 0 || pt.MemorySlices > 63 {
		return nil, fmt.Errorf("GPU %s: %d memory slices cannot be published as counters", g.UUID, pt.MemorySlices)
	}
	cands := []candidate{{name: "compute-slices", cap: int64(pt.ComputeSlices), use: func(pr *inventory.PartitionProfile) int64 { return int64(pr.ComputeSlices) }}}
	engineNames := map[string]bool{}
	for _, pr := range pt.Profiles {
		for e := range pr.Engines {
			engineNames[e] = true
		}
	}
	for _, e := range slices.Sorted(maps.Keys(engineNames)) {
		capacity := g.Engines[e]
		for _, pr := range pt.Profiles {
			capacity = max(capacity, pr.Engines[e]) // a whole-GPU profile shows the GPU's count
		}
		cands = append(cands, candidate{name: kebab(e), cap: capacity, use: func(pr *inventory.PartitionProfile) int64 { return pr.Engines[e] }})
	}
	for i := range pt.Profiles {
		pr := &pt.Profiles[i]
		if pr.MaxInstances <= 0 {
			continue
		}
		name := pr.Name
		cands = append(cands, candidate{name: "instances-" + kebab(name), cap: int64(pr.MaxInstances), use: func(q *inventory.PartitionProfile) int64 {
			if q.Name == name {
				return 1
			}
			return 0
		}})
	}

	usage, complete := enumerateUsage(pt, cands)
	plan := &counterPlan{capacity: map[string]int64{}}
	for k := 0; k < pt.MemorySlices; k++ {
		plan.names = append(plan.names, memorySliceCounter(k))
		plan.capacity[memorySliceCounter(k)] = 1
	}
	var kept []int
	for ci, c := range cands {
		if complete && !binds(usage, len(cands), ci, c.cap, kept, cands) {
			continue
		}
		kept = append(kept, ci)
		plan.extras = append(plan.extras, c)
		plan.names = append(plan.names, c.name)
		plan.capacity[c.name] = c.cap
	}
	if len(plan.names) > MaxCountersPerSet {
		return nil, fmt.Errorf("GPU %s: partition table needs %d counters, a counter set holds %d", g.UUID, len(plan.names), MaxCountersPerSet)
	}
	return plan, nil
}

// enumerateUsage lists, for every set of pairwise non-overlapping
// placements, how much of each candidate limit it uses (flattened,
// len(cands) values per set). complete is false when the search was cut.
func enumerateUsage(pt *inventory.Partitioning, cands []candidate) (usage []int64, complete bool) {
	type dev struct {
		mask uint64
		use  []int64
	}
	var devs []dev
	for i := range pt.Profiles {
		pr := &pt.Profiles[i]
		use := make([]int64, len(cands))
		for ci, c := range cands {
			use[ci] = c.use(pr)
		}
		for _, pl := range pr.Placements {
			devs = append(devs, dev{mask: (uint64(1)<<pl.Size - 1) << pl.Start, use: use})
		}
	}
	cur := make([]int64, len(cands))
	sets := 0
	var walk func(i int, occupied uint64) bool
	walk = func(i int, occupied uint64) bool {
		if i == len(devs) {
			if sets++; sets > maxEnumeratedSets {
				return false
			}
			usage = append(usage, cur...)
			return true
		}
		if !walk(i+1, occupied) {
			return false
		}
		d := devs[i]
		if occupied&d.mask != 0 {
			return true
		}
		for ci, v := range d.use {
			cur[ci] += v
		}
		ok := walk(i+1, occupied|d.mask)
		for ci, v := range d.use {
			cur[ci] -= v
		}
		return ok
	}
	return usage, walk(0, 0)
}

// binds reports whether candidate ci can be exceeded by a set of placements
// that respects the memory slices and the limits already kept.
func binds(usage []int64, width, ci int, capacity int64, kept []int, cands []candidate) bool {
next:
	for off := 0; off < len(usage); off += width {
		set := usage[off : off+width]
		for _, k := range kept {
			if set[k] > cands[k].cap {
				continue next
			}
		}
		if set[ci] > capacity {
			return true
		}
	}
	return false
}

// kebab turns an inventory name (jpegDecoders, 1g.10gb+me) into a DNS
// label part (jpeg-decoders, 1g-10gb-me), as counter names must be.
func kebab(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case unicode.IsUpper(r):
			if i > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(unicode.ToLower(r))
		case r == '.' || r == '+' || r == '_':
			b.WriteByte('-')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
