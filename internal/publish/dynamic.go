package publish

import (
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/fabric"
	"github.com/tessera-gpu/tessera/internal/gpuvendor/vendors"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// dynamicGPU decides whether g is published as a partitionable device:
// only where its vendor carves partitions per claim
// (gpuvendor.Capabilities.DynamicPartitions). A GPU whose MIG mode change needs a reset (A100 class)
// is dynamic only while MIG mode is already on; with it off, the whole GPU
// is all it can offer, since the driver never resets a GPU.
func dynamicGPU(g *inventory.GPU, p Partitioning) (bool, GPUMode) {
	pt := g.Partitioning
	if pt == nil {
		return false, GPUMode{Mode: "whole"}
	}
	static := GPUMode{Mode: "whole"}
	if pt.Enabled {
		static.Mode = "partitions"
	}
	modeWhy := staticModes(g)
	switch {
	case p != Dynamic:
		static.Reason = "static partitioning"
		return false, static
	case !vendors.Capabilities(g.Vendor).DynamicPartitions:
		static.Reason = fmt.Sprintf("%s partition modes are set by the vendor driver, not per claim", pt.Kind)
		return false, static
	case len(pt.Profiles) == 0:
		static.Reason = "no partition profiles reported"
		return false, static
	case modeWhy != "":
		static.Reason = modeWhy
		return false, static
	case pt.ModeChangeNeedsReset && !pt.Enabled:
		static.Reason = "MIG mode is off and turning it on needs a GPU reset; published whole"
		return false, static
	case pt.ModeChangeNeedsReset:
		return true, GPUMode{Mode: "dynamic", Reason: "MIG mode is on and turning it off needs a GPU reset; placements only, no whole GPU"}
	}
	return true, GPUMode{Mode: "dynamic"}
}

// dynamicDevices returns g's counter set (named like the GPU device) and
// its devices: the whole GPU consuming every counter, unless MIG mode is
// pinned on, and every profile at every placement consuming its share. The
// counters of partitions held reports nobody holds are withheld from the
// set; their UUIDs are returned, with the GPU's memory slices and the
// placements left out: those partitions block, and every free one of a GPU
// outside the window (not open). A closed GPU keeps its counter set and its
// whole GPU's consumption, so opening it changes its placements' slice
// only.
func dynamicDevices(name string, g *inventory.GPU, f fabric.Attrs, rank int, open bool, held func(string, *inventory.Partition) bool, profiles []string) (resourceapi.CounterSet, []item, []Entry, []string, *MemorySlices, error) {
	pt := g.Partitioning
	plan, err := planCounters(g)
	if err != nil {
		return resourceapi.CounterSet{}, nil, nil, nil, nil, err
	}
	set := resourceapi.CounterSet{Name: name, Counters: plan.all()}
	withheld := withhold(set.Counters, plan, g, held)
	avail := modeFree(plan, g, held)
	usable := make([]bool, pt.MemorySlices) // slices a placement that fits covers
	var items []item
	var leftOut []Entry
	if wholeOffered(g) {
		d, err := wholeGPUDevice(name, g, f)
		if err != nil {
			return set, nil, nil, nil, nil, fmt.Errorf("device %s (%s): %w", name, g.PCIBusID, err)
		}
		d.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: name, Counters: plan.all()}}
		addModeAttributes(&d, g)
		items = append(items, item{dev: d, entry: Entry{Name: name, GPU: g}, group: groupWhole, parent: rank, dynamic: true})
	}
	for i := range pt.Profiles {
		pr := &pt.Profiles[i]
		if wholeModeProfile(g, pr) {
			continue // the whole GPU's device is this mode
		}
		for _, pl := range pr.Placements {
			p := inventory.Partition{Kind: pt.Kind, Profile: pr.Name, Placement: pl, MemoryBytes: pr.MemoryBytes, ComputeUnits: pr.ComputeUnits, Engines: pr.Engines, MemoryPartitionMode: pt.MemoryMode}
			pname := PartitionName(name, p)
			use := plan.consumption(pr, pl)
			e := Entry{Name: pname, GPU: g, Carve: &Carve{Profile: pr.Name, Placement: pl}}
			for k := range g.Partitions {
				if q := &g.Partitions[k]; q.Profile == pr.Name && q.Placement == pl {
					e.Partition = q
				}
			}
			if len(profiles) > 0 && !slices.Contains(profiles, pr.Name) && e.Partition == nil {
				continue
			}
			fit := fits(use, avail)
			if fit {
				markSlices(usable, pl)
			}
			if (!fit || !open) && (e.Partition == nil || closedMode(g, open)) {
				// The partitions that exist leave it no room: no allocation
				// can take it (their counters are taken), so it is left out
				// until a destroy republishes it. Never an allocated one: a
				// placement allocated and not yet carved fits, since the
				// counters kept it apart from every partition allocated.
				// Or its GPU is outside the window, which closes no GPU a
				// placement of which may be allocated (window.go).
				leftOut = append(leftOut, e)
				continue
			}
			d, err := partitionDevice(pname, g, &p, f)
			if err != nil {
				return set, nil, nil, nil, nil, fmt.Errorf("device %s: %w", pname, err)
			}
			d.ConsumesCounters = []resourceapi.DeviceCounterConsumption{{CounterSet: name, Counters: use}}
			items = append(items, item{dev: d, entry: e, group: groupPlacement, parent: rank, mem: pr.MemoryBytes, stranded: stranded(pt, pl), damage: damage(pt, pr, pl), start: pl.Start,
				blocked: e.Partition != nil})
		}
	}
	// Its place among the slices stays while none of its placements is
	// published (closed, or all left out): the pool keeps its number of
	// slices, so opening the GPU updates that one slice (layout.go).
	items = append(items, item{entry: Entry{Name: name, GPU: g}, group: groupPlacement, parent: rank, placeholder: true})
	ms := memorySlices(g, avail, usable)
	return set, items, leftOut, withheld, &ms, nil
}

// closedMode reports whether g is a GPU of modes outside the window: none
// of its partitions is held (one held would keep it open: touched), so
// those that exist are the mode it was left in, which prepare changes at
// will, and they are left out like every other placement of a closed GPU.
// Published, one could be allocated and then gone with the mode when the
// GPU rests, unpublishing an allocated device.
func closedMode(g *inventory.GPU, open bool) bool { return !open && modal(g) }

// withhold takes from counters what each partition of g that held says
// nobody holds consumes, never going below zero, and returns their UUIDs.
// The published devices stay the same, so names and allocations are stable;
// only the placements overlapping such a partition (and the whole GPU)
// become unallocatable until it is gone.
func withhold(counters map[string]resourceapi.Counter, plan *counterPlan, g *inventory.GPU, held func(string, *inventory.Partition) bool) []string {
	if held == nil || modal(g) {
		// A mode's partitions nobody holds are free for the mode's claims.
		return nil
	}
	var uuids []string
	for i := range g.Partitions {
		p := &g.Partitions[i]
		if held(g.UUID, p) {
			continue
		}
		uuids = append(uuids, p.UUID)
		for name, use := range plan.consumption(g.Partitioning.Profile(p.Profile), p.Placement) {
			have, take := counters[name].Value, use.Value
			counters[name] = counter(max(have.Value()-take.Value(), 0))
		}
	}
	return uuids
}

// stranded counts the memory slices outside pl that no placement of any
// profile can use once pl is taken: every placement covering them overlaps
// pl. On an H100 a 1g.10gb at slice 6 strands slice 7 (1g.10gb cannot
// start there; only 1g.20gb at 6, 3g.40gb at 4 and 7g.80gb reach it).
func stranded(pt *inventory.Partitioning, pl inventory.Placement) int {
	n := 0
	for s := 0; s < pt.MemorySlices; s++ {
		if pl.Overlaps(inventory.Placement{Start: s, Size: 1}) {
			continue
		}
		reachable := false
		for i := range pt.Profiles {
			for _, q := range pt.Profiles[i].Placements {
				if q.Overlaps(inventory.Placement{Start: s, Size: 1}) && !q.Overlaps(pl) {
					reachable = true
				}
			}
		}
		if !reachable {
			n++
		}
	}
	return n
}

// damage counts the placements of other profiles at least as large as pr
// that a partition of pr at pl would block. Filling the placements that
// block the fewest first keeps large placements free as long as possible:
// on an H100 the first 1g.10gb goes to slice 6, the first 3g.40gb to slice
// 4, leaving 4g.40gb at 0 possible.
func damage(pt *inventory.Partitioning, pr *inventory.PartitionProfile, pl inventory.Placement) int {
	n := 0
	for i := range pt.Profiles {
		q := &pt.Profiles[i]
		if q.Name == pr.Name || q.MemorySlices < pr.MemorySlices {
			continue
		}
		for _, ql := range q.Placements {
			if ql.Overlaps(pl) {
				n++
			}
		}
	}
	return n
}

// IsDynamic reports whether g is published as a partitionable device under
// p: the agent carves, destroys and switches MIG mode only on such GPUs.
func IsDynamic(g *inventory.GPU, p Partitioning) bool {
	ok, _ := dynamicGPU(g, p)
	return ok
}
