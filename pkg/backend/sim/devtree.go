package sim

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/pkg/inventory"
)

// The simulator's private /dev: the character devices the imitated hardware
// has, so CDI specs can name real paths. Their majors come from the Linux
// LOCAL/EXPERIMENTAL range (120-127, Documentation/admin-guide/devices.txt),
// which no driver in the kernel registers, so a simulated node can never
// alias a real device even when a container runtime opens one.
const (
	majorNVIDIA     = 120 // nvidia<N> (minor N) and nvidiactl (minor 255)
	majorNVIDIAUVM  = 121 // nvidia-uvm (minor 0), nvidia-uvm-tools (minor 1)
	majorNVIDIACaps = 122 // nvidia-caps/nvidia-cap<N> (minor N)
	majorDRI        = 123 // dri/card<N> (minor N), dri/renderD<N> (minor N)
	majorKFD        = 124 // kfd (minor 0)

	minorNVIDIACtl = 255
	// MIG capability minors, as /proc/driver/nvidia-caps/mig-minors lists
	// them: config 1, monitor 2, then per GPU minor 15 GPU instances of 9
	// (one GI access and 8 CI accesses), gpu<N>/gi<G>/access =
	// 3 + N*135 + G*9 and gpu<N>/gi<G>/ci<C>/access = that + 1 + C (MIG
	// user guide, "Device Nodes and Capabilities": gpu31/gi14/ci7/access is
	// 4322).
	capMIGConfig  = 1
	capMIGMonitor = 2
)

// devNode is one device node, path relative to the dev root.
type devNode struct {
	path         string
	major, minor int64
}

// migCapMinors returns the nvidia-caps minors of a MIG GPU instance and of
// one of its compute instances.
func migCapMinors(gpuMinor, gi, ci int) (giAccess, ciAccess int) {
	giAccess = 3 + gpuMinor*135 + gi*9
	return giAccess, giAccess + 1 + ci
}

func capPath(n int) string { return "nvidia-caps/nvidia-cap" + strconv.Itoa(n) }

// gpuNodes lists the nodes a GPU and its partitions need, shared nodes
// (nvidiactl, kfd) excluded.
func gpuNodes(g *inventory.GPU) []devNode {
	var out []devNode
	switch g.Vendor {
	case inventory.VendorNVIDIA:
		out = append(out, devNode{"nvidia" + strconv.Itoa(g.Minor), majorNVIDIA, int64(g.Minor)})
	case inventory.VendorAMD:
		out = append(out, driNodes(g.Minor, g.RenderMinor)...)
	}
	for i := range g.Partitions {
		out = append(out, partitionNodes(g, &g.Partitions[i])...)
	}
	return out
}

// partitionNodes lists the nodes one partition adds: a MIG instance its GI
// and CI access capabilities, an AMD compute partition its own DRM nodes.
func partitionNodes(g *inventory.GPU, p *inventory.Partition) []devNode {
	switch p.Kind {
	case inventory.PartitionMIG:
		gi, ci := migCapMinors(g.Minor, p.GPUInstanceID, p.ComputeInstanceID)
		return []devNode{{capPath(gi), majorNVIDIACaps, int64(gi)}, {capPath(ci), majorNVIDIACaps, int64(ci)}}
	case inventory.PartitionXCP:
		return driNodes(p.Minor, p.RenderMinor)
	}
	return nil
}

func driNodes(card, render int) []devNode {
	return []devNode{
		{"dri/card" + strconv.Itoa(card), majorDRI, int64(card)},
		{"dri/renderD" + strconv.Itoa(render), majorDRI, int64(render)},
	}
}

// nodeDevices lists every node the node's current state needs.
func nodeDevices(n *inventory.Node) []devNode {
	var nvidia, mig, amd bool
	var out []devNode
	for i := range n.GPUs {
		g := &n.GPUs[i]
		switch g.Vendor {
		case inventory.VendorNVIDIA:
			nvidia = true
			mig = mig || g.Partitioning != nil && g.Partitioning.Kind == inventory.PartitionMIG
		case inventory.VendorAMD:
			amd = true
		}
		out = append(out, gpuNodes(g)...)
	}
	if nvidia {
		out = append(out,
			devNode{"nvidiactl", majorNVIDIA, minorNVIDIACtl},
			devNode{"nvidia-uvm", majorNVIDIAUVM, 0},
			devNode{"nvidia-uvm-tools", majorNVIDIAUVM, 1})
	}
	if mig {
		out = append(out,
			devNode{capPath(capMIGConfig), majorNVIDIACaps, capMIGConfig},
			devNode{capPath(capMIGMonitor), majorNVIDIACaps, capMIGMonitor})
	}
	if amd {
		out = append(out, devNode{"kfd", majorKFD, 0})
	}
	return out
}

// mknod is unix.Mknod; tests replace it to exercise the fallback as root.
var mknod = unix.Mknod

// devTree creates and removes nodes under root.
type devTree struct {
	root string
	// fallback reports (once) that mknod is not allowed and regular files
	// stand in for the nodes.
	fallbackOnce sync.Once
}

// reset empties the tree and creates nodes: the tree always mirrors the
// state the backend starts with, whatever an earlier process left.
func (t *devTree) reset(logger klog.Logger, nodes []devNode) error {
	if err := os.RemoveAll(t.root); err != nil {
		return fmt.Errorf("clearing device tree %s: %w", t.root, err)
	}
	if err := os.MkdirAll(t.root, 0o755); err != nil {
		return fmt.Errorf("creating device tree %s: %w", t.root, err)
	}
	return t.create(logger, nodes)
}

// create makes nodes; on failure it removes the ones it made.
func (t *devTree) create(logger klog.Logger, nodes []devNode) error {
	for i, n := range nodes {
		if err := t.mknod(logger, n); err != nil {
			t.remove(logger, nodes[:i])
			return err
		}
	}
	return nil
}

func (t *devTree) mknod(logger klog.Logger, n devNode) error {
	p := filepath.Join(t.root, filepath.FromSlash(n.path))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("creating device node directory: %w", err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("replacing device node %s: %w", p, err)
	}
	err := mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(uint32(n.major), uint32(n.minor))))
	if err == nil {
		return nil
	}
	// Not root (or no CAP_MKNOD): an empty file keeps paths resolvable,
	// and DeviceNumbers still gives CDI the numbers.
	t.fallbackOnce.Do(func() {
		logger.V(2).Info("Cannot create device nodes, using empty regular files instead", "root", t.root, "err", err)
	})
	if werr := os.WriteFile(p, nil, 0o666); werr != nil {
		return fmt.Errorf("creating stand-in for device node %s: %w", p, werr)
	}
	return nil
}

// remove deletes nodes; missing ones are fine.
func (t *devTree) remove(logger klog.Logger, nodes []devNode) {
	for _, n := range nodes {
		p := filepath.Join(t.root, filepath.FromSlash(n.path))
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			logger.Error(err, "Removing device node", "path", p)
		}
	}
}
