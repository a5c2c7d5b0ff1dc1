package sim

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tessera-gpu/tessera/internal/gpuvendor/vendors"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/vfio"
	"github.com/tessera-gpu/tessera/internal/vfio/simfs"
)

// The node's PCI sysfs lives in stateDir/sys (internal/vfio/simfs): a
// GPU's driver link says which driver holds it, and writing its
// driver_override, unbind and bind moves it as the kernel would. Like
// driver bindings on a host it outlives the agent but not a reboot: New
// keeps the tree under the boot id it was made in and builds it afresh
// under another. A GPU its host driver does not hold (vfio-pci has it, or
// a passthrough was cut short between unbind and bind) is what NVML and
// amdgpu no longer see: Discover leaves it out, telemetry cannot read it,
// and partitions, intervals and MPS refuse it.

// vfioMajors are the simulated VFIO nodes' majors, after the vendors'
// regions in the LOCAL/EXPERIMENTAL range (devtree.go): the container node
// vfio/vfio is 125:0 (on a host the misc device 10:196), group g's node
// vfio/<g> is 126:g (on a host a dynamic major).
const (
	vfioContainerMajor = 125
	vfioGroupMajor     = 126
)

func init() {
	for _, m := range simMajors {
		if m >= vfioContainerMajor {
			panic("sim: the vendors' device regions reach the VFIO majors")
		}
	}
}

// PCISysfs implements backend.PCIHost: the tree, behind the tests' holds
// (hold.go).
func (b *Backend) PCISysfs() vfio.Sysfs {
	return heldSysfs{Tree: b.pci, stateDir: b.stateDir, logger: b.logger}
}

// openPCI takes over the node's sysfs tree if it is from this boot
// (restored: the state file was), else builds it as the node boots.
func (b *Backend) openPCI(restored bool) error {
	root := filepath.Join(b.stateDir, "sys")
	opt := simfs.WithGroupNodes(b.groupNode)
	if restored {
		t, err := simfs.Open(root, b.machine.PCI, opt)
		if err == nil {
			b.pci = t
			return nil
		}
		b.logger.Info("Rebuilding the simulated PCI sysfs tree", "reason", err)
	}
	t, err := simfs.Build(root, b.machine.PCI, opt)
	if err != nil {
		return err
	}
	b.pci = t
	return nil
}

// groupNode creates or removes IOMMU group g's node, as the kernel does
// when the group's first device is bound to vfio-pci or its last leaves.
func (b *Backend) groupNode(g int, present bool) error {
	n := devNode{path: vfio.GroupNode(g), major: vfioGroupMajor, minor: int64(g)}
	if present {
		return b.devs.mknod(b.logger, n)
	}
	b.devs.remove(b.logger, []devNode{n})
	return nil
}

// vfioNodes are the VFIO nodes the tree has now: the container node where
// the IOMMU is on, and each bound group's.
func (b *Backend) vfioNodes() ([]devNode, error) {
	if !b.machine.PCI.IOMMU {
		return nil, nil
	}
	out := []devNode{{path: vfio.ContainerNode, major: vfioContainerMajor}}
	groups, err := b.pci.Groups()
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		out = append(out, devNode{path: vfio.GroupNode(g), major: vfioGroupMajor, minor: int64(g)})
	}
	return out, nil
}

// vfioNumbers answers DeviceNumbers for a VFIO node of the machine.
func (b *Backend) vfioNumbers(p string) (major, minor int64, ok bool) {
	if !b.machine.PCI.IOMMU {
		return 0, 0, false
	}
	if p == vfio.ContainerNode {
		return vfioContainerMajor, 0, true
	}
	g, err := strconv.Atoi(strings.TrimPrefix(p, "vfio/"))
	if err != nil || !strings.HasPrefix(p, "vfio/") {
		return 0, 0, false
	}
	for _, f := range b.machine.PCI.Functions {
		if f.Group == g {
			return vfioGroupMajor, int64(g), true
		}
	}
	return 0, 0, false
}

// onDriver reports whether g's host driver holds it now.
func (b *Backend) onDriver(g *inventory.GPU) (bool, error) {
	want := vendors.Capabilities(g.Vendor).HostDriver
	if want == "" {
		return true, nil
	}
	d, err := b.pci.Driver(g.PCIBusID)
	if err != nil {
		return false, fmt.Errorf("sim: GPU %s: %w", g.PCIBusID, err)
	}
	return d == want, nil
}

// errNotOnDriver is what a call on a GPU its driver let go returns.
var errNotOnDriver = errors.New("its host driver does not hold it (bound to vfio-pci, or on no driver): the driver cannot reach it")

// reachable fails for a GPU its host driver does not hold.
func (b *Backend) reachable(g *inventory.GPU) error {
	ok, err := b.onDriver(g)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("sim: GPU %s (%s): %w", g.UUID, g.PCIBusID, errNotOnDriver)
	}
	return nil
}

// linksAmong are links with their GPUs renumbered by index (the new index
// of GPU i; -1 for one left out), those of a GPU left out dropped: a GPU
// the driver cannot reach has no link it can report.
func linksAmong(links []inventory.Link, index []int) []inventory.Link {
	var out []inventory.Link
	for _, l := range links {
		if index[l.A] < 0 {
			continue
		}
		l.A = index[l.A]
		if l.Kind != inventory.LinkNVSwitch {
			if index[l.B] < 0 {
				continue
			}
			l.B = index[l.B]
		}
		out = append(out, l)
	}
	return out
}
