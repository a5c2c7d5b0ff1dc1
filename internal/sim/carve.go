package sim

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/tessera-gpu/tessera/internal/gpuvendor/nvidia"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// The partition rules, shared by the loader (partitions in a machine file)
// and the backend (CreatePartition), so a machine file can never describe a
// state that the backend itself would refuse to reach.

// planPartition checks that a partition of profile at placement can be cut
// on g next to g's existing partitions and returns it filled in from the
// profile table (ids, UUID and minors are left to the caller), honouring the
// profile's MaxInstances. placement.Size 0 means "the profile's size".
func planPartition(g *inventory.GPU, profile string, placement inventory.Placement) (inventory.Partition, error) {
	pt := g.Partitioning
	if pt == nil {
		return inventory.Partition{}, fmt.Errorf("GPU %s (%s) cannot be partitioned", g.UUID, g.ProductName)
	}
	if !pt.Enabled {
		return inventory.Partition{}, fmt.Errorf("GPU %s (%s): %s partitioning is not enabled", g.UUID, g.ProductName, pt.Kind)
	}
	pr := pt.Profile(profile)
	if pr == nil {
		return inventory.Partition{}, fmt.Errorf("GPU %s (%s) has no partition profile %q (it has: %s)", g.UUID, g.ProductName, profile, profileNames(pt))
	}
	size := pr.MemorySlices
	if placement.Size != 0 && placement.Size != size {
		return inventory.Partition{}, fmt.Errorf("GPU %s: profile %s is %d slices wide, not %d", g.UUID, profile, size, placement.Size)
	}
	want := inventory.Placement{Start: placement.Start, Size: size}
	if !slices.Contains(pr.Placements, want) {
		return inventory.Partition{}, fmt.Errorf("GPU %s: profile %s cannot be placed at %d (valid starts: %s)", g.UUID, profile, placement.Start, placementStarts(pr.Placements))
	}
	usedCompute, sameProfile := 0, 0
	for _, q := range g.Partitions {
		if q.Placement.Overlaps(want) {
			return inventory.Partition{}, fmt.Errorf("GPU %s: profile %s at %d:%d overlaps partition %s (%s at %d:%d)",
				g.UUID, profile, want.Start, want.Size, q.UUID, q.Profile, q.Placement.Start, q.Placement.Size)
		}
		if pt.Kind == inventory.PartitionXCP && q.Profile != profile {
			// The compute partition mode (SPX/DPX/QPX/CPX) is GPU-wide: the
			// amdgpu driver cuts a GPU into equal partitions only.
			return inventory.Partition{}, fmt.Errorf("GPU %s: profile %s cannot join partition %s of profile %s: the compute partition mode is GPU-wide", g.UUID, profile, q.UUID, q.Profile)
		}
		if q.Profile == profile {
			sameProfile++
		}
		usedCompute += computeSlicesOf(pt, q.Profile)
	}
	if pr.MaxInstances > 0 && sameProfile >= pr.MaxInstances {
		return inventory.Partition{}, fmt.Errorf("GPU %s: profile %s allows %d instance(s) per GPU and %d exist", g.UUID, profile, pr.MaxInstances, sameProfile)
	}
	if usedCompute+pr.ComputeSlices > pt.ComputeSlices {
		return inventory.Partition{}, fmt.Errorf("GPU %s: profile %s needs %d compute slices and only %d of %d are free", g.UUID, profile, pr.ComputeSlices, pt.ComputeSlices-usedCompute, pt.ComputeSlices)
	}
	return inventory.Partition{
		Kind:         pt.Kind,
		Profile:      profile,
		Placement:    want,
		MemoryBytes:  pr.MemoryBytes,
		ComputeUnits: pr.ComputeUnits,
		Engines:      maps.Clone(pr.Engines),
	}, nil
}

// gpuInstanceID picks the id of a new partition: the MIG tree id for its
// placement (see migGPUInstanceID), the partition index for AMD compute
// partitions; the lowest free id where the placement fits no tree.
func gpuInstanceID(g *inventory.GPU, p inventory.Placement) (int, error) {
	pt := g.Partitioning
	if pt.Kind == inventory.PartitionXCP {
		return p.Start / p.Size, nil
	}
	if id, ok := migGPUInstanceID(pt.MemorySlices, p); ok && id < nvidia.MaxGPUInstances {
		return id, nil
	}
	for id := 0; id < nvidia.MaxGPUInstances; id++ {
		if !slices.ContainsFunc(g.Partitions, func(q inventory.Partition) bool { return q.GPUInstanceID == id }) {
			return id, nil
		}
	}
	return 0, fmt.Errorf("GPU %s: all %d GPU instance ids are in use", g.UUID, nvidia.MaxGPUInstances)
}

// sortPartitions orders partitions by placement so Discover is stable.
func sortPartitions(ps []inventory.Partition) {
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Placement.Start < ps[j].Placement.Start })
}

func computeSlicesOf(pt *inventory.Partitioning, profile string) int {
	if pr := pt.Profile(profile); pr != nil {
		return pr.ComputeSlices
	}
	return 0
}

func profileNames(pt *inventory.Partitioning) string {
	names := make([]string, len(pt.Profiles))
	for i, p := range pt.Profiles {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

func placementStarts(ps []inventory.Placement) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = fmt.Sprint(p.Start)
	}
	return "{" + strings.Join(s, ",") + "}"
}
