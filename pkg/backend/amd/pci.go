package amd

import (
	"path"
	"regexp"
	"strings"

	"github.com/tessera-gpu/tessera/pkg/pci"
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
	// CardMinors are the N of drm/cardN (the PCI device's own DRM node).
	CardMinors []int
	// ComputeMode and MemoryMode are the current partition modes (CPX,
	// NPS4); Available* the modes the GPU offers, as amdgpu prints them.
	ComputeMode, MemoryMode                  string
	AvailableComputeModes, AvailableMemModes []string
}

var pcieRootRE = regexp.MustCompile(`^pci[0-9a-f]{4,8}:[0-9a-f]{2}$`)

// readPCI reads /sys/bus/pci/devices/<bdf>. Files that are missing are
// left unknown: only the amdgpu of MI300-class GPUs has the partition
// files, and numa_node is -1 on single-socket hosts.
func readPCI(r fsRoot, bdf string) pciInfo {
	info := pciInfo{DeviceID: -1, NUMANode: -1}
	dir := path.Join(pciDevicesDir, bdf)
	if !r.exists(dir) {
		return info
	}
	info.Present = true
	if v, err := r.readInt(path.Join(dir, "device")); err == nil {
		info.DeviceID = v
	}
	if v, err := r.readInt(path.Join(dir, "numa_node")); err == nil {
		info.NUMARead = true
		if v >= 0 && v < 1<<16 {
			info.NUMANode = int(v)
		}
	}
	// The device's real path is /sys/devices/pciDDDD:BB/<bridges>/<bdf>;
	// its first component after devices/ names the root complex.
	if real, err := r.resolve(dir); err == nil {
		for _, c := range strings.Split(real, "/") {
			if pcieRootRE.MatchString(c) {
				info.PCIeRoot = c
				break
			}
		}
	}
	info.CardMinors = r.prefixedIndex(path.Join(dir, "drm"), "card")
	info.ComputeMode, _ = r.readString(path.Join(dir, "current_compute_partition"))
	info.MemoryMode, _ = r.readString(path.Join(dir, "current_memory_partition"))
	info.AvailableComputeModes = modeList(r, path.Join(dir, "available_compute_partition"))
	info.AvailableMemModes = modeList(r, path.Join(dir, "available_memory_partition"))
	info.ComputeMode = strings.ToUpper(info.ComputeMode)
	info.MemoryMode = strings.ToUpper(info.MemoryMode)
	return info
}

// modeList parses amdgpu's comma-separated mode lists ("SPX, DPX, CPX").
func modeList(r fsRoot, rel string) []string {
	s, err := r.readString(rel)
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range strings.Split(s, ",") {
		if m = strings.ToUpper(strings.TrimSpace(m)); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// bdf formats an extended BDF the way sysfs names PCI devices.
func bdf(domain, bus, dev, fn uint64) string {
	return pci.BusID{Domain: uint32(domain), Bus: uint8(bus), Dev: uint8(dev), Func: uint8(fn)}.String()
}
