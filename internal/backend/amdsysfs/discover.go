package amdsysfs

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// unknownModel is published when neither the device ID table nor the KFD
// name identifies a GPU; the reason is logged once and counted
// (tessera_gpu_values_unknown{value="model"}).
//
// The model is published as this literal rather than left out, unlike an
// unknown number: selectors on the model are the commonest there are
// (docs/claims.md's first, `model == "H100"`), and the scheduler aborts a
// claim's allocation outright on a CEL "no such key" (resource.k8s.io/v1,
// CELDeviceSelector), so a GPU without the attribute would make every such
// unguarded selector fail on its node instead of passing it over. "unknown"
// equals no model anyone selects, the device stays allocatable by class,
// and the value says plainly that Tessera does not know the GPU. Numbers
// are the other way round: a 0 would satisfy `memory <= 24Gi` or
// `fabricBandwidthGBps < 100` for a GPU that may be anything, so they are
// left out.
const unknownModel = "unknown"

// minVRAM is the least VRAM taken as a reading: KFD reports GPU memory in
// GiB, and a bank total below 1 MiB (0 included) is a bad read, not a GPU
// (it could not even hold a share: publish.ShareMemoryStep).
const minVRAM = 1 << 20

// unknowns collects why a GPU's values could not be read, by value
// (inventory.ValueMemory, ...): each is left out of the GPU's devices, and
// the backend records it once (Backend.record).
type unknowns map[string][]string

func (u unknowns) add(value, format string, args ...any) {
	u[value] = append(u[value], fmt.Sprintf(format, args...))
}

// values are the unknown values, in name order.
func (u unknowns) values() []string {
	out := make([]string, 0, len(u))
	for v := range u {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

func (u unknowns) why(value string) string { return strings.Join(u[value], "; ") }

// nodeFacts are the per-KFD-node values every GPU and partition needs.
// CUs and Memory are 0 when unknown (inventory.GPU's convention).
type nodeFacts struct {
	CUs         int64
	Memory      int64
	RenderMinor int
	XCC         int
}

// facts reads a GPU node's compute units, VRAM and render minor, noting
// what could not be read. A value that cannot be read is unknown (0, and
// why in unk): the device is still published without it rather than
// hidden, because a GPU that is there and works is worth offering.
func facts(n *kfdNode, warn func(string, ...any), unk unknowns) nodeFacts {
	var f nodeFacts
	simd, _ := n.Props.Get("simd_count")
	per, ok := n.Props.Get("simd_per_cu")
	switch {
	case per > 0 && simd/per > 0:
		f.CUs = int64(simd / per)
	case !ok:
		unk.add(inventory.ValueComputeUnits, "KFD node %d: no simd_per_cu to count compute units from simd_count %d", n.ID, simd)
	default:
		unk.add(inventory.ValueComputeUnits, "KFD node %d: simd_per_cu %d with simd_count %d gives no compute units", n.ID, per, simd)
	}
	vram, banks := n.vramBytes()
	lm, _ := n.Props.Get("local_mem_size")
	switch {
	case banks && vram >= minVRAM:
		f.Memory = vram
	case lm >= minVRAM && lm < 1<<62:
		// Kernels before mem_banks carried VRAM used local_mem_size.
		f.Memory = int64(lm)
	case banks:
		unk.add(inventory.ValueMemory, "KFD node %d: VRAM mem_banks total %d bytes and local_mem_size %d, not a GPU's memory", n.ID, vram, lm)
	default:
		unk.add(inventory.ValueMemory, "KFD node %d: no VRAM mem_banks (heap_type 1 or 2) and local_mem_size %d", n.ID, lm)
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
// cus is that node's compute units (0 unknown), which tells apart models
// that share a device ID.
func identity(g *inventory.GPU, n *kfdNode, pci pciInfo, cus int64, warn func(string, ...any), unk unknowns) {
	g.Vendor = inventory.VendorAMD
	model(g, n, pci, cus, unk)
	gfx, had := n.Props.Get("gfx_target_version")
	if v, ok := gfxVersion(gfx); ok {
		g.GFXVersion = v
		g.Architecture = architecture(gfx)
	} else if !had {
		// Kernels before gfx_target_version (the real Vega 10 capture
		// has none): the target is unknown, and so is the architecture
		// that follows from it. Left out, not guessed from the device ID.
		unk.add(inventory.ValueGFXVersion, "KFD node %d: properties have no gfx_target_version (an older kernel): gfxVersion and architecture left out", n.ID)
	} else {
		unk.add(inventory.ValueGFXVersion, "KFD node %d: gfx_target_version %d is not a gfx target: gfxVersion and architecture left out", n.ID, gfx)
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

// model names the GPU from its device ID (KFD's, else the PCI device
// file's), else from KFD's name for it, else unknownModel. Every case but
// the first is recorded with the device ID, whatever the reason: an ID the
// table lacks, none at all, or one the CU count cannot settle. The reason
// names no KFD node or GPU, so that GPUs of one device ID share it and the
// backend says it once for all of them (sayUnidentified).
func model(g *inventory.GPU, n *kfdNode, pci pciInfo, cus int64, unk unknowns) {
	dev, _ := n.Props.Get("device_id")
	if dev == 0 && pci.DeviceID > 0 {
		dev = uint64(pci.DeviceID)
	}
	var why string
	switch {
	case dev == 0:
		why = "no device ID (KFD device_id 0, no PCI device file)"
	case dev > 0xffff:
		why = fmt.Sprintf("device ID %d is not a PCI device ID", dev)
	default:
		var m pciModel
		if m, why = modelFor(uint16(dev), cus); why == "" {
			g.Model, g.ProductName = m.Model, m.ProductName
			return
		}
	}
	if name := strings.TrimSpace(n.Name); name != "" && name != "ip discovery" {
		g.Model, g.ProductName = name, name
		unk.add(inventory.ValueModel, "%s: model %q taken from the KFD name", why, name)
		return
	}
	g.Model = unknownModel
	unk.add(inventory.ValueModel, "%s, and no KFD name: model %q", why, unknownModel)
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
func buildGPU(r fsRoot, c *card, cpuNodes map[int]bool, warn func(string, ...any), unk unknowns) inventory.GPU {
	pci := readPCI(r, c.bdf(), warn)
	first := c.Nodes[0]
	all := make([]nodeFacts, len(c.Nodes))
	for i, n := range c.Nodes {
		all[i] = facts(n, warn, unk)
	}
	cus, mem, xcc := total(all)
	g := inventory.GPU{PCIBusID: c.bdf(), MemoryBytes: mem, ComputeUnits: cus, Health: inventory.Health{State: inventory.Healthy}}
	identity(&g, first, pci, all[0].CUs, warn, unk)
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
	// Deferred: the other modes are added once the current one has its
	// placements (below); pt is shared with the GPU returned.
	defer addModes(g.Partitioning, &g, pci, warn)
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

// total is a card's compute units, memory and XCCs over its partitions.
// A partition's unknown makes the card's unknown (0): the sum of the rest
// would publish a card smaller than it is.
func total(all []nodeFacts) (cus, mem int64, xcc int) {
	for _, f := range all {
		cus += f.CUs
		mem += f.Memory
		xcc += f.XCC
	}
	for _, f := range all {
		if f.CUs == 0 {
			cus = 0
		}
		if f.Memory == 0 {
			mem = 0
		}
	}
	return cus, mem, xcc
}

// partitionCapable: compute partitioning exists on CDNA3 (MI300 series)
// and wherever amdgpu publishes the partition files.
func partitionCapable(arch string, pci pciInfo) bool {
	return arch == "cdna3" || pci.ComputeMode != "" || len(pci.AvailableComputeModes) > 0
}
