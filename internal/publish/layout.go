package publish

import (
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// The slice layout (package doc, rules 4 and 6). The allocator scans a
// node's slices in name order and each slice's devices in order, and
// evaluates CEL on every device it scans before the first fit. With every
// whole GPU in one slice ahead of the placements, a 1g.10gb claim failed
// eight whole-GPU selectors before its first placement. Instead, the k-th
// slice of a node with dynamic GPUs holds the k-th whole GPU in rule 2's
// order followed by the placements of the k-th GPU in rule 4's order (the
// other end), so both kinds of claim meet a device of their kind first or
// second, and first fit takes exactly the device it took before: whole GPUs
// still fill from one end and partitions from the other (BenchmarkChurn
// places and serves the same). A carve or destroy changes the placements of
// one GPU, hence one slice; opening or closing a GPU (window.go) too.

// layout groups items, which are in publishing order, into device slices:
// one per dynamic GPU as above, then the whole GPUs and partitions of the
// others, at most MaxDevicesPerSlice each.
func layout(items []item) [][]item {
	wholes := map[int]item{}       // dynamic GPUs' whole devices, by rank
	placements := map[int][]item{} // their published placements
	var ranks []int                // dynamic GPUs, in rule 2's order
	var rest []item
	for _, it := range items {
		switch {
		case it.dynamic && it.group == groupWhole:
			wholes[it.parent] = it
		case it.group == groupPlacement:
			if _, seen := placements[it.parent]; !seen {
				placements[it.parent] = nil
			}
			if !it.placeholder {
				placements[it.parent] = append(placements[it.parent], it)
			}
		default:
			rest = append(rest, it)
			continue
		}
		if !slices.Contains(ranks, it.parent) {
			ranks = append(ranks, it.parent)
		}
	}
	slices.Sort(ranks)
	var out [][]item
	for k, r := range ranks {
		var s []item
		if w, ok := wholes[r]; ok {
			s = append(s, w)
		}
		// A GPU whose MIG mode is pinned on has no whole device: its
		// slice holds placements only, and keeps its place.
		out = append(out, append(s, placements[ranks[len(ranks)-1-k]]...))
	}
	for len(rest) > MaxDevicesPerSlice {
		out = append(out, rest[:MaxDevicesPerSlice])
		rest = rest[MaxDevicesPerSlice:]
	}
	if len(rest) > 0 || len(out) == 0 {
		// An empty pool still gets one slice: "no devices" differs from "no driver".
		out = append(out, rest)
	}
	return out
}

// paginate writes the device slices of layout, then the counter sets into
// slices of their own (a slice holds devices or counters, never both), and
// records each device in res.
func paginate(items []item, counterSets []resourceapi.CounterSet, res *Result) (resourceslice.Pool, error) {
	var pool resourceslice.Pool
	for _, group := range layout(items) {
		if len(group) > MaxDevicesPerSlice {
			return pool, fmt.Errorf("GPU %s: a whole GPU and %d placements exceed a slice's %d devices", group[len(group)-1].entry.GPU.UUID, len(group)-1, MaxDevicesPerSlice)
		}
		var s resourceslice.Slice
		for _, it := range group {
			if n := len(it.dev.Attributes) + len(it.dev.Capacity); n > MaxAttrsAndCapacity {
				return pool, fmt.Errorf("device %s has %d attributes and capacities, limit %d", it.dev.Name, n, MaxAttrsAndCapacity)
			}
			s.Devices = append(s.Devices, it.dev)
			it.entry.Attributes = it.dev.Attributes
			res.Devices[it.dev.Name] = it.entry
			res.Order = append(res.Order, it.dev.Name)
		}
		pool.Slices = append(pool.Slices, s)
	}
	for len(counterSets) > 0 {
		k := min(len(counterSets), MaxCounterSetsPerSlice)
		pool.Slices = append(pool.Slices, resourceslice.Slice{SharedCounters: counterSets[:k]})
		counterSets = counterSets[k:]
	}
	return pool, nil
}
