package amdsysfs

import (
	"fmt"
	"strings"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// unknownModel is published when neither the device ID table nor the KFD
// name identifies a GPU; the reason is logged.
const unknownModel = "unknown"

// nodeFacts are the per-KFD-node values every GPU and partition needs.
type nodeFacts struct {
	CUs         int64
	Memory      int64
	RenderMinor int
	XCC         int
}

// facts reads a GPU node's compute units, VRAM and render minor, noting
// what could not be read. Values that cannot be read are 0: the device is
// still published (a selector on memory simply will not match it) rather
// than hidden, because a GPU that is there and works is worth offering.
func facts(n *kfdNode, warn func(string, ...any)) nodeFacts {
	var f nodeFacts
	simd, _ := n.Props.Get("simd_count")
	if per, _ := n.Props.Get("simd_per_cu"); per > 0 {
		f.CUs = int64(simd / per)
	} else {
		warn("KFD node %d: simd_per_cu missing or 0, computeUnits unknown", n.ID)
	}
	if m, ok := n.vramBytes(); ok {
		f.Memory = m
	} else if lm, _ := n.Props.Get("local_mem_size"); lm > 0 && lm < 1<<62 {
		// Kernels before mem_banks carried VRAM used local_mem_size.
		f.Memory = int64(lm)
	} else {
		warn("KFD node %d: no VRAM mem_banks (heap_type 1 or 2), memory unknown", n.ID)
	}
	for _, p := range n.Problems {
		warn("KFD node %d: %s", n.ID, p)
	}
	r, ok := n.Props.Get("drm_render_minor")
	if !ok || r < 128 || r > 1<<20 {
		warn("KFD node %d: drm_render_minor %d is not a render node", n.ID, r)
		f.RenderMinor = -1
	} else {
		f.RenderMinor = int(r)
	}
	f.XCC = 1
	if x, ok := n.Props.Get("num_xcc"); ok && x > 0 && x < 64 {
		f.XCC = int(x)
	}
	return f
}

// identity fills the fields a whole card shares from its first KFD node.
func identity(g *inventory.GPU, n *kfdNode, pci pciInfo, cus int64, warn func(string, ...any)) {
	g.Vendor = inventory.VendorAMD
	dev, _ := n.Props.Get("device_id")
	if dev == 0 && pci.DeviceID > 0 {
		dev = uint64(pci.DeviceID)
	}
	if m, ok := modelFor(uint16(dev), cus); ok && dev <= 0xffff {
		g.Model, g.ProductName = m.Model, m.ProductName
	} else if name := strings.TrimSpace(n.Name); name != "" && name != "ip discovery" {
		g.Model, g.ProductName = name, name
		warn("KFD node %d: device ID 0x%04x not in the model table, model taken from the KFD name %q", n.ID, dev, name)
	} else {
		g.Model = unknownModel
		warn("KFD node %d: device ID 0x%04x not in the model table and no KFD name, model %q", n.ID, dev, unknownModel)
	}
	gfx, _ := n.Props.Get("gfx_target_version")
	if v, ok := gfxVersion(gfx); ok {
		g.GFXVersion = v
		g.Architecture = architecture(gfx)
	} else {
		warn("KFD node %d: gfx_target_version %d unusable, gfxVersion unknown", n.ID, gfx)
	}
	if id, _ := n.Props.Get("unique_id"); id != 0 {
		g.UUID = fmt.Sprintf("%016x", id)
	} else {
		// No serial from the SMU (some workstation boards): KFD's gpu_id, a
		// hash of the device's properties, is stable while the hardware is.
		g.UUID = fmt.Sprintf("%016x", n.GPUID)
		warn("KFD node %d: unique_id missing or 0, using gpu_id %d as the UUID", n.ID, n.GPUID)
	}
	g.NUMANode = pci.NUMANode
	g.PCIeRoot, g.PCIeBridges = pci.PCIeRoot, pci.PCIeBridges
}

// cpuNUMA derives a GPU's NUMA node from KFD when sysfs PCI has none: the
// GPU's PCIe io_link goes to the CPU node it hangs off, and KFD numbers CPU
// nodes by proximity domain (from ACPI SRAT via CRAT), which is the NUMA
// node on the hosts KFD supports.
func cpuNUMA(n *kfdNode, cpuNodes map[int]bool) int {
	for _, l := range n.Links {
		if t, _ := l.Get("type"); t != ioLinkTypePCIe {
			continue
		}
		to, ok := l.Get("node_to")
		if ok && cpuNodes[int(to)] {
			return int(to)
		}
	}
	return -1
}

// minorFor returns a KFD node's card minor: from /sys/class/drm, else from
// the PCI device's drm/ (partition 0 only), else derived (see
// derivedCardMinor).
func minorFor(r fsRoot, render int, pci pciInfo, first bool, warn func(string, ...any)) int {
	if render < 0 {
		return -1
	}
	if m, ok := cardMinor(r, render); ok {
		return m
	}
	if first && len(pci.CardMinors) == 1 {
		return pci.CardMinors[0]
	}
	warn("renderD%d: no DRM card entry in sysfs, card minor derived as %d", render, derivedCardMinor(render))
	return derivedCardMinor(render)
}

// buildGPU turns one card into an inventory GPU: whole in SPX mode, a
// parent with one xcp Partition per KFD node otherwise.
func buildGPU(r fsRoot, c *card, cpuNodes map[int]bool, warn func(string, ...any)) inventory.GPU {
	pci := readPCI(r, c.bdf(), warn)
	first := c.Nodes[0]
	all := make([]nodeFacts, len(c.Nodes))
	var cus, mem int64
	xcc := 0
	for i, n := range c.Nodes {
		all[i] = facts(n, warn)
		cus += all[i].CUs
		mem += all[i].Memory
		xcc += all[i].XCC
	}
	g := inventory.GPU{PCIBusID: c.bdf(), MemoryBytes: mem, ComputeUnits: cus, Health: inventory.Health{State: inventory.Healthy}}
	identity(&g, first, pci, all[0].CUs, warn)
	if !pci.NUMARead {
		g.NUMANode = cpuNUMA(first, cpuNodes)
	}
	g.RenderMinor = all[0].RenderMinor
	g.Minor = minorFor(r, all[0].RenderMinor, pci, true, warn)

	mode := computeMode(pci, c.Nodes, warn)
	if !partitionCapable(g.Architecture, pci) {
		return g
	}
	per := all[0].XCC
	g.Partitioning = &inventory.Partitioning{
		Kind:          inventory.PartitionXCP,
		Enabled:       len(c.Nodes) > 1,
		MemorySlices:  xcc,
		ComputeSlices: xcc,
		Profiles: []inventory.PartitionProfile{{
			Name: mode, MemoryBytes: all[0].Memory, ComputeUnits: all[0].CUs,
			MemorySlices: per, ComputeSlices: per,
		}},
	}
	if len(c.Nodes) == 1 {
		g.Partitioning.Profiles[0].Placements = []inventory.Placement{{Start: 0, Size: per}}
		return g
	}
	for i := range c.Nodes {
		f := all[i]
		pl := inventory.Placement{Start: c.PartIndex[i] * per, Size: per}
		g.Partitioning.Profiles[0].Placements = append(g.Partitioning.Profiles[0].Placements, pl)
		g.Partitions = append(g.Partitions, inventory.Partition{
			Kind:      inventory.PartitionXCP,
			Profile:   mode,
			Placement: pl,
			// All partitions of a card report the card's unique_id (real
			// MI308X capture), so the partition index makes it unique.
			UUID:                fmt.Sprintf("%s-xcp%d", g.UUID, c.PartIndex[i]),
			GPUInstanceID:       c.PartIndex[i],
			MemoryBytes:         f.Memory,
			ComputeUnits:        f.CUs,
			RenderMinor:         f.RenderMinor,
			Minor:               minorFor(r, f.RenderMinor, pci, i == 0, warn),
			MemoryPartitionMode: pci.MemoryMode,
		})
	}
	return g
}

// partitionCapable: compute partitioning exists on CDNA3 (MI300 series)
// and wherever amdgpu publishes the partition files.
func partitionCapable(arch string, pci pciInfo) bool {
	return arch == "cdna3" || pci.ComputeMode != "" || len(pci.AvailableComputeModes) > 0
}
