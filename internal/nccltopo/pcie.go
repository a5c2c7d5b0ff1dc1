package nccltopo

import (
	"fmt"
	"slices"

	"github.com/tessera-gpu/tessera/internal/pci"
)

// The PCIe tree above the GPUs. NCCL never re-places a PCI node the file
// placed: a GPU written straight under its CPU stays there, and a NIC that
// NCCL then finds in /sys behind the GPU's own PCIe switch ends up PHB or
// SYS away from it, so GPUDirect RDMA is turned off. So each GPU sits under
// the bridges the inventory read from sysfs (inventory.GPU.PCIeBridges,
// root port first), shared by the GPUs behind the same ones, and a NIC
// behind the GPU's switch is PIX/PXB away, as on the host.

// placer finds each GPU's parent element in the file's PCIe tree.
type placer struct {
	g *graph
	// bridges are the bridge elements written, by bus ID.
	bridges map[string]*element
	// groups are the inferred switches of GPUs the inventory knows no
	// bridges of (switchGroups), by group, and how many were written.
	group  []int
	groups map[int]*element
	n      int
}

func newPlacer(g *graph) *placer {
	return &placer{g: g, bridges: map[string]*element{}, group: switchGroups(g), groups: map[int]*element{}}
}

// parent is the element the claim's p-th GPU goes under, below cpu: its
// last known bridge; else, for GPUs the inventory joins with a PCIe peer
// link (one switch) but whose bridges it does not know, one inferred
// bridge in domain ffff, which no host has, so that its ID clashes with no
// device NCCL finds; else cpu itself.
func (pl *placer) parent(cpu *element, p int) *element {
	gpu := pl.g.gpu(p)
	attrs := func(busID string) *element {
		return el("pci", "busid", busID, "class", BridgeClass, "link_speed", linkSpeed(gpu.Architecture), "link_width", itoa(linkWidth))
	}
	if len(gpu.PCIeBridges) > 0 {
		parent := cpu
		for _, b := range gpu.PCIeBridges {
			br := pl.bridges[b]
			if br == nil {
				br = parent.add(attrs(b))
				pl.bridges[b] = br
			}
			parent = br
		}
		return parent
	}
	grp := pl.group[p]
	if grp < 0 {
		return cpu
	}
	br := pl.groups[grp]
	if br == nil {
		br = cpu.add(attrs(fmt.Sprintf("ffff:%02x:00.0", pl.n)))
		pl.groups[grp] = br
		pl.n++
	}
	return br
}

// nvmlIndices are the claim's GPUs' indices in the container's management
// library: NVML (and ROCm SMI) number the GPUs a process can open in PCI
// bus order, and the container has exactly the claim's GPUs' device nodes,
// so its GPU with the lowest bus ID is 0. This assumes no other claim's
// GPUs in the same container (docs/training.md, "Two claims in one
// container").
func nvmlIndices(g *graph) []int {
	order := make([]int, len(g.idx))
	for i := range order {
		order[i] = i
	}
	// checkGPUs checked every bus ID.
	bus := func(p int) pci.BusID { b, _ := pci.ParseBusID(g.gpu(p).PCIBusID); return b }
	slices.SortFunc(order, func(a, b int) int {
		switch {
		case bus(a).Less(bus(b)):
			return -1
		case bus(b).Less(bus(a)):
			return 1
		}
		return 0
	})
	out := make([]int, len(order))
	for dev, p := range order {
		out[p] = dev
	}
	return out
}
