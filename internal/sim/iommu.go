package sim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tessera-gpu/tessera/internal/gpuvendor/vendors"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/pci"
	"github.com/tessera-gpu/tessera/internal/vfio/simfs"
)

// The machine's PCI side, for passthrough (docs/vfio.md): every GPU is a
// function of its vendor (the vendor's PCI ID and host driver), every
// bridge of a GPU's pcieBridges a PCI-to-PCI bridge on pcieport, and each
// pciDevices entry as listed. IOMMU groups: a GPU's iommuGroup, else one
// of its own; a bridge one of its own; numbers left free by the file are
// handed out from 1 in that order (real numbers depend on the firmware;
// none of the catalogue's is a real host's).

const (
	classGPU    = 0x030200 // 3D controller, as data-center GPUs enumerate
	classBridge = 0x060400 // PCI-to-PCI bridge
	bridgeDrv   = "pcieport"
)

// pci builds b.m.PCI from the GPUs and the file's iommu and pciDevices.
func (b *builder) pci() {
	if len(b.errs) > 0 {
		return
	}
	h := simfs.Host{IOMMU: b.f.IOMMU == nil || *b.f.IOMMU, VFIO: true}
	used := map[int]bool{}
	for i, g := range b.gpuGroups {
		if g != nil {
			if *g < 0 {
				b.errorf(b.gpuPaths[i]+".iommuGroup", "%d is not a group number (0 and up)", *g)
			}
			used[*g] = true
		}
	}
	for i, d := range b.f.PCIDevices {
		if d.IOMMUGroup != nil {
			used[*d.IOMMUGroup] = true
		} else {
			b.errorf(fmt.Sprintf("pciDevices[%d].iommuGroup", i), "is required: a device is listed to share a GPU's group")
		}
	}
	next := 1
	fresh := func() int {
		for used[next] {
			next++
		}
		used[next] = true
		return next
	}
	seen := map[string]string{}
	for i := range b.m.Node.GPUs {
		g := &b.m.Node.GPUs[i]
		seen[g.PCIBusID] = b.gpuPaths[i]
		f := gpuFunction(g)
		if p := b.gpuGroups[i]; p != nil {
			f.Group = *p
		} else {
			f.Group = fresh()
		}
		h.Functions = append(h.Functions, f)
	}
	h.Functions = append(h.Functions, b.bridges(seen, fresh)...)
	h.Functions = append(h.Functions, b.pciDevices(seen)...)
	b.m.PCI = h
}

// gpuFunction is g as a PCI function, without its group.
func gpuFunction(g *inventory.GPU) simfs.Function {
	caps := vendors.Capabilities(g.Vendor)
	return simfs.Function{Address: g.PCIBusID, Class: classGPU, Vendor: caps.PCIVendorID, Driver: caps.HostDriver,
		Parent: parentPath(g.PCIeRoot, g.PCIeBridges), NUMANode: g.NUMANode}
}

// parentPath is the sysfs path below devices/ of what sits under root
// through bridges.
func parentPath(root string, bridges []string) string {
	return strings.Join(append([]string{root}, bridges...), "/")
}

// bridges are the GPUs' bridges, each once, in the order first met.
func (b *builder) bridges(seen map[string]string, fresh func() int) []simfs.Function {
	var out []simfs.Function
	for i := range b.m.Node.GPUs {
		g := &b.m.Node.GPUs[i]
		for k, br := range g.PCIeBridges {
			if _, dup := seen[br]; dup {
				continue
			}
			seen[br] = b.gpuPaths[i] + ".pcieBridges"
			out = append(out, simfs.Function{Address: br, Class: classBridge, Vendor: "0x8086", Driver: bridgeDrv,
				Group: fresh(), Parent: parentPath(g.PCIeRoot, g.PCIeBridges[:k]), NUMANode: g.NUMANode})
		}
	}
	return out
}

// pciDevices are the file's pciDevices, checked.
func (b *builder) pciDevices(seen map[string]string) []simfs.Function {
	var out []simfs.Function
	for i, d := range b.f.PCIDevices {
		path := fmt.Sprintf("pciDevices[%d]", i)
		addr, err := pci.Normalize(d.PCIBusID)
		if err != nil {
			b.errorf(path+".pciBusID", "%q is not a PCI bus ID (want DDDD:BB:DD.F)", d.PCIBusID)
			continue
		}
		if other, dup := seen[addr]; dup {
			b.errorf(path+".pciBusID", "%s is already used by %s", addr, other)
			continue
		}
		seen[addr] = path
		class, err := strconv.ParseInt(d.Class, 0, 32)
		if err != nil || class < 0 || class > 0xffffff {
			b.errorf(path+".class", "%q is not a PCI class code (want 0x020000 and the like)", d.Class)
		}
		if d.Vendor == "" || !strings.HasPrefix(d.Vendor, "0x") {
			b.errorf(path+".vendor", "%q is not a PCI vendor ID (want 0x15b3 and the like)", d.Vendor)
		}
		root := d.PCIeRoot
		if root == "" {
			root = "pci" + addr[:len(addr)-8] + ":00"
		} else if !pci.IsRoot(root) {
			b.errorf(path+".pcieRoot", "%q is not a PCIe root (want pciDDDD:BB, lowercase hex)", root)
		}
		group := 0
		if d.IOMMUGroup != nil {
			group = *d.IOMMUGroup
		}
		out = append(out, simfs.Function{Address: addr, Class: class, Vendor: strings.ToLower(d.Vendor), Driver: d.Driver,
			Group: group, Parent: root, NUMANode: -1})
	}
	return out
}

// IOMMUGroup is the IOMMU group of the GPU with bus ID bdf; false where
// the machine has no IOMMU or no such GPU.
func (m *Machine) IOMMUGroup(bdf string) (int, bool) {
	if !m.PCI.IOMMU {
		return 0, false
	}
	i := slices.IndexFunc(m.PCI.Functions, func(f simfs.Function) bool { return f.Address == bdf })
	if i < 0 {
		return 0, false
	}
	return m.PCI.Functions[i].Group, true
}
