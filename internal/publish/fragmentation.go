package publish

import (
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// MemorySlices says how much of a dynamic GPU's memory is free and how much
// of that no published profile can use now: slices no placement that fits
// covers, because the partitions that exist (or the compute slices they
// take) leave each placement over them short. They come back when those
// partitions go. The scheduler cannot see this; an operator can
// (tessera_mig_unusable_memory_slices, docs/metrics.md).
type MemorySlices struct {
	Total, Free, Unusable int
}

// markSlices marks the memory slices placement pl covers.
func markSlices(usable []bool, pl inventory.Placement) {
	for k := pl.Start; k < pl.Start+pl.Size && k < len(usable); k++ {
		usable[k] = true
	}
}

// memorySlices counts g's free memory slices (avail, what no partition
// takes) and those of them no published placement that fits covers
// (usable, marked while the placements were built); the whole GPU covers
// all while nothing is carved.
func memorySlices(g *inventory.GPU, avail map[string]int64, usable []bool) MemorySlices {
	pt := g.Partitioning
	s := MemorySlices{Total: pt.MemorySlices}
	if modal(g) {
		// A mode's partitions cover the whole GPU: free while there are
		// none, and no slice is ever stranded by them.
		if len(g.Partitions) == 0 {
			s.Free = pt.MemorySlices
		}
		return s
	}
	whole := len(g.Partitions) == 0 && (!pt.ModeChangeNeedsReset || !pt.Enabled)
	for k := range pt.MemorySlices {
		if avail[memorySliceCounter(k)] <= 0 {
			continue
		}
		s.Free++
		if !whole && !usable[k] {
			s.Unusable++
		}
	}
	return s
}
