package amdsysfs

import (
	"context"
	"fmt"
	"os"
	"path"
	"slices"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// Compute partition modes as the agent sets them (--partitioning=dynamic:
// docs/partitioning.md, "Dynamic AMD compute partitions"). Discover lists
// every mode available_compute_partition offers as a profile, each
// partition of it a placement over the GPU's XCCs, and the mode the GPU is
// in; SwitchMode writes current_compute_partition. The memory mode
// (current_memory_partition) decides which compute modes amdgpu offers and
// is left to the operator: changing it reloads the driver of every GPU in
// the hive (/work/shared facts: amd-smi partition.md, "Operational
// requirements").

var _ backend.ModeSwitcher = (*Backend)(nil)

// modePartitions is how many partitions a compute mode makes of a GPU of
// xcc XCCs: CPX one per XCC (8 on MI300X, 6 on MI300A), the others fixed.
func modePartitions(mode string, xcc int) int {
	switch mode {
	case "SPX":
		return 1
	case "DPX":
		return 2
	case "TPX":
		return 3
	case "QPX":
		return 4
	case "CPX":
		return xcc
	}
	return 0
}

// addModes adds to pt (whose one profile is the current mode, with KFD's
// figures) a profile for every other mode available_compute_partition
// lists, and records the current modes. A mode's partitions split the
// GPU's XCCs, memory and CUs evenly: amdgpu makes them so, and KFD tells
// the real figures once the mode is set. A mode that does not split the
// XCCs evenly is left out, said through warn.
func addModes(pt *inventory.Partitioning, g *inventory.GPU, pci pciInfo, warn func(string, ...any)) {
	pt.Mode, pt.MemoryMode = pt.Profiles[0].Name, pci.MemoryMode
	xcc := pt.ComputeSlices
	for _, m := range pci.AvailableComputeModes {
		if pt.Profile(m) != nil {
			continue
		}
		n := modePartitions(m, xcc)
		if n <= 0 || xcc%n != 0 {
			warn("available_compute_partition lists %s, which does not split %d XCCs evenly: left out", m, xcc)
			continue
		}
		per := xcc / n
		pr := inventory.PartitionProfile{Name: m, MemorySlices: per, ComputeSlices: per, MaxInstances: n}
		if g.MemoryBytes > 0 {
			pr.MemoryBytes = g.MemoryBytes / int64(n)
		}
		if g.ComputeUnits > 0 {
			pr.ComputeUnits = g.ComputeUnits / int64(n)
		}
		for k := range n {
			pr.Placements = append(pr.Placements, inventory.Placement{Start: k * per, Size: per})
		}
		pt.Profiles = append(pt.Profiles, pr)
	}
	if len(pci.AvailableComputeModes) > 0 && !slices.Contains(pci.AvailableComputeModes, pt.Mode) {
		// The current mode is not one the GPU can be set to now (the memory
		// mode changed under it): publishing leaves such a GPU static.
		warn("current compute mode %s is not among available_compute_partition's %v", pt.Mode, pci.AvailableComputeModes)
	}
	slices.SortStableFunc(pt.Profiles, func(a, b inventory.PartitionProfile) int { return len(a.Placements) - len(b.Placements) })
}

// SwitchMode implements backend.ModeSwitcher: it writes mode to the GPU's
// current_compute_partition, which amdgpu refuses (write error) while a
// process holds the GPU. The old mode's KFD nodes go and the new mode's
// appear as the driver enumerates them, moving KFD's generation_id, which
// the next Discover follows.
func (b *Backend) SwitchMode(ctx context.Context, gpuUUID, mode string) error {
	n, err := b.Discover(ctx)
	if err != nil {
		return err
	}
	var g *inventory.GPU
	for i := range n.GPUs {
		if n.GPUs[i].UUID == gpuUUID {
			g = &n.GPUs[i]
		}
	}
	switch {
	case g == nil:
		return fmt.Errorf("amd: no GPU %s", gpuUUID)
	case g.Partitioning == nil:
		return fmt.Errorf("amd: GPU %s (%s) has no compute partition modes", gpuUUID, g.PCIBusID)
	case g.Partitioning.Mode == mode:
		return nil
	case g.Partitioning.Profile(mode) == nil:
		return fmt.Errorf("amd: GPU %s (%s): mode %s is not available under memory mode %s", gpuUUID, g.PCIBusID, mode, g.Partitioning.MemoryMode)
	}
	rel := path.Join(pciDevicesDir, g.PCIBusID, "current_compute_partition")
	if err := os.WriteFile(b.root.path(rel), []byte(mode+"\n"), 0); err != nil {
		return fmt.Errorf("amd: setting GPU %s (%s) to %s: %w", gpuUUID, g.PCIBusID, mode, err)
	}
	b.mu.Lock()
	b.node = nil // read again, whatever generation_id says
	b.mu.Unlock()
	b.log.Info("Wrote compute partition mode", "gpu", gpuUUID, "pciBusID", g.PCIBusID, "mode", mode)
	return nil
}
