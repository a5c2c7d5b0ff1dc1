package publish

import (
	"slices"

	"github.com/tessera-gpu/tessera/pkg/inventory"
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

// memorySlices counts g's free memory slices and those of them no
// placement of the published profiles (all when profiles is empty) that
// fits in avail covers; the whole GPU covers all when nothing is carved.
func memorySlices(plan *counterPlan, g *inventory.GPU, avail map[string]int64, profiles []string) MemorySlices {
	pt := g.Partitioning
	s := MemorySlices{Total: pt.MemorySlices}
	usable := make([]bool, pt.MemorySlices)
	for i := range pt.Profiles {
		pr := &pt.Profiles[i]
		if len(profiles) > 0 && !slices.Contains(profiles, pr.Name) {
			continue
		}
		for _, pl := range pr.Placements {
			if !fits(plan.consumption(pr, pl), avail) {
				continue
			}
			for k := pl.Start; k < pl.Start+pl.Size && k < len(usable); k++ {
				usable[k] = true
			}
		}
	}
	if len(g.Partitions) == 0 && (!pt.ModeChangeNeedsReset || !pt.Enabled) {
		// The whole GPU is published and free.
		for k := range usable {
			usable[k] = true
		}
	}
	for k := range pt.MemorySlices {
		if avail[memorySliceCounter(k)] <= 0 {
			continue
		}
		s.Free++
		if !usable[k] {
			s.Unusable++
		}
	}
	return s
}
