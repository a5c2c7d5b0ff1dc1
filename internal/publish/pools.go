package publish

import (
	"slices"

	resourceapi "k8s.io/api/resource/v1"
)

// PoolState is what the API server holds of one pool, read from its
// ResourceSlices: the newest generation's slices, and the older ones left
// over. The scheduler uses a pool only when every slice of its newest
// generation is there, so this is the one reading of "published" for the
// agent's readiness, kubectl tessera doctor and the test harness.
type PoolState struct {
	// Generation is the newest generation.
	Generation int64
	// Want is the resourceSliceCount its slices give (the largest, should
	// they disagree: CountsDiffer).
	Want         int64
	CountsDiffer bool
	// Slices and Devices are those of the newest generation.
	Slices  int
	Devices int
	// Older counts the slices of older generations, OlderGenerations
	// (sorted) says which.
	Older            int
	OlderGenerations []int64
}

// Complete reports whether every slice of the newest generation is there,
// and no more.
func (p *PoolState) Complete() bool { return p.Slices > 0 && int64(p.Slices) == p.Want }

// Missing reports whether slices of the newest generation are missing.
func (p *PoolState) Missing() bool { return int64(p.Slices) < p.Want }

// Pools reads the pools of driver in slices, by pool name.
func Pools(sl []resourceapi.ResourceSlice, driver string) map[string]*PoolState {
	pools := map[string]*PoolState{}
	for i := range sl {
		if sl[i].Spec.Driver != driver {
			continue
		}
		p := sl[i].Spec.Pool
		if st := pools[p.Name]; st == nil {
			pools[p.Name] = &PoolState{Generation: p.Generation}
		} else {
			st.Generation = max(st.Generation, p.Generation)
		}
	}
	for i := range sl {
		if sl[i].Spec.Driver != driver {
			continue
		}
		p := sl[i].Spec.Pool
		st := pools[p.Name]
		if p.Generation != st.Generation {
			st.Older++
			if !slices.Contains(st.OlderGenerations, p.Generation) {
				st.OlderGenerations = append(st.OlderGenerations, p.Generation)
			}
			continue
		}
		if st.Slices > 0 && st.Want != p.ResourceSliceCount {
			st.CountsDiffer = true
		}
		st.Want = max(st.Want, p.ResourceSliceCount)
		st.Slices++
		st.Devices += len(sl[i].Spec.Devices)
	}
	for _, st := range pools {
		slices.Sort(st.OlderGenerations)
	}
	return pools
}
