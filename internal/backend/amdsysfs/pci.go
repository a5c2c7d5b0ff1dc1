package amdsysfs

import (
	"path"
	"slices"
	"strings"

	"github.com/tessera-gpu/tessera/internal/pci"
)

// pciDevicesDir holds one link per PCI function, named by its BDF.
const pciDevicesDir = "sys/bus/pci/devices"

// pciInfo is what the PCI device directory of a GPU adds to KFD's view.
// Every field is optional: a KFD-only capture has none of them.
type pciInfo struct {
	Present  bool
	DeviceID int64 // -1 unknown
	NUMANode int   // -1 unknown or no affinity
	// NUMARead is true when numa_node was read: its -1 then means "no
	// affinity" and KFD's guess must not replace it.
	NUMARead bool
	PCIeRoot string
	// PCIeBridges are the bridges between the root and the device, root
	// port first.
	PCIeBridges []string
	// CardMinors are the N of drm/cardN (the PCI device's own DRM node).
	CardMinors []int
	// ComputeMode and MemoryMode are the current partition modes (CPX,
	// NPS4); Available* the modes the GPU offers, as amdgpu prints them.
	ComputeMode, MemoryMode                  string
	AvailableComputeModes, AvailableMemModes []string
}

// readPCI reads /sys/bus/pci/devices/<bdf>. Files that are missing are
// left unknown: only the amdgpu of MI300-class GPUs has the partition
// files, and numa_node is -1 on single-socket hosts. A value a file should
// never hold is reported through warn and left unknown too: what KFD says
// then stands (the partitions it lists, its CPU affinity for NUMA).
func readPCI(r fsRoot, bdf string, warn func(string, ...any)) pciInfo {
	info := pciInfo{DeviceID: -1, NUMANode: -1}
	dir := path.Join(pciDevicesDir, bdf)
	if !r.exists(dir) {
		return info
	}
	info.Present = true
	if v, err := r.readInt(path.Join(dir, "device")); err == nil {
		info.DeviceID = v
	}
	numa := path.Join(dir, "numa_node")
	if v, err := r.readInt(numa); err == nil && v >= -1 && v < 1<<16 {
		info.NUMARead = true
		info.NUMANode = int(v)
	} else if err == nil {
		warn("%s is %d, not a NUMA node: NUMA node from KFD's CPU affinity", r.path(numa), v)
	} else if r.exists(numa) {
		warn("%v: NUMA node from KFD's CPU affinity", err)
	}
	// The device's real path is /sys/devices/pciDDDD:BB/<bridges>/<bdf>;
	// its first component after devices/ names the root complex.
	if real, err := r.resolve(dir); err == nil {
		if root, bridges, ok := pci.Chain(real, bdf); ok {
			info.PCIeRoot, info.PCIeBridges = root, bridges
		}
	}
	info.CardMinors = r.prefixedIndex(path.Join(dir, "drm"), "card")
	info.ComputeMode = mode(r, path.Join(dir, "current_compute_partition"), computeModes, warn)
	info.MemoryMode = mode(r, path.Join(dir, "current_memory_partition"), memoryModes, warn)
	info.AvailableComputeModes = modeList(r, path.Join(dir, "available_compute_partition"), computeModes, warn)
	info.AvailableMemModes = modeList(r, path.Join(dir, "available_memory_partition"), memoryModes, warn)
	return info
}

// The modes amdgpu knows (its amdgpu_gfx.c and amdgpu_gmc.c name them so).
var (
	computeModes = []string{"SPX", "DPX", "TPX", "QPX", "CPX"}
	memoryModes  = []string{"NPS1", "NPS2", "NPS4", "NPS8"}
)

// mode reads a current-mode file: one of known, upper-cased; "" when the
// file is missing or holds anything else (reported).
func mode(r fsRoot, rel string, known []string, warn func(string, ...any)) string {
	s, err := r.readString(rel)
	if err != nil {
		return ""
	}
	if m := strings.ToUpper(s); slices.Contains(known, m) {
		return m
	}
	warn("%s holds %q, not one of %s: treated as unknown", r.path(rel), truncate(s), strings.Join(known, ", "))
	return ""
}

// modeList parses amdgpu's comma-separated mode lists ("SPX, DPX, CPX"),
// keeping the known modes and reporting the rest.
func modeList(r fsRoot, rel string, known []string, warn func(string, ...any)) []string {
	s, err := r.readString(rel)
	if err != nil {
		return nil
	}
	var out, bad []string
	for _, m := range strings.Split(s, ",") {
		m = strings.ToUpper(strings.TrimSpace(m))
		switch {
		case m == "":
		case slices.Contains(known, m):
			out = append(out, m)
		default:
			bad = append(bad, truncate(m))
		}
	}
	if len(bad) > 0 {
		warn("%s lists %q, not among %s: left out", r.path(rel), bad, strings.Join(known, ", "))
	}
	return out
}

// bdf formats an extended BDF the way sysfs names PCI devices.
func bdf(domain, bus, dev, fn uint64) string {
	return pci.BusID{Domain: uint32(domain), Bus: uint8(bus), Dev: uint8(dev), Func: uint8(fn)}.String()
}
