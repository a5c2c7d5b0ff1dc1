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

	"github.com/tessera-gpu/tessera/internal/gpuvendor"
	"github.com/tessera-gpu/tessera/internal/gpuvendor/vendors"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// The simulator's private /dev: the character devices the imitated hardware
// has, so CDI specs can name real paths. Which nodes a GPU, a partition and
// a vendor have is the vendor's (gpuvendor); the numbers are made up here.
// Majors come from the Linux LOCAL/EXPERIMENTAL range (120-127,
// Documentation/admin-guide/devices.txt), which no driver in the kernel
// registers, so a simulated node can never alias a real device even when a
// container runtime opens one. Each vendor's regions get them in the order
// of vendors.All: NVIDIA's nvidia<N> and nvidiactl 120, nvidia-uvm 121,
// nvidia-caps 122, AMD's dri 123, kfd 124. Minors are the hardware's.
const (
	firstMajor = 120
	lastMajor  = 127
)

// simMajors maps each vendor's character-device region to its major.
var simMajors = func() map[string]int64 {
	out := map[string]int64{}
	next := int64(firstMajor)
	for _, v := range vendors.All() {
		for _, m := range v.Majors() {
			if next > lastMajor {
				panic("sim: more device regions than the LOCAL/EXPERIMENTAL majors " + strconv.Itoa(firstMajor) + "-" + strconv.Itoa(lastMajor))
			}
			out[m] = next
			next++
		}
	}
	return out
}()

// devNode is one device node, path relative to the dev root.
type devNode struct {
	path         string
	major, minor int64
}

func devNodes(nodes []gpuvendor.Node) []devNode {
	out := make([]devNode, len(nodes))
	for i, n := range nodes {
		out[i] = devNode{n.Path, simMajors[n.Major], n.Minor}
	}
	return out
}

func vendorOf(g *inventory.GPU) (gpuvendor.Vendor, error) {
	v, ok := vendors.For(g.Vendor)
	if !ok {
		return nil, fmt.Errorf("GPU %s: vendor %q has no device nodes", g.UUID, g.Vendor)
	}
	return v, nil
}

// gpuNodes lists the nodes a GPU and its partitions need, the vendor's
// shared nodes (nvidiactl, kfd) excluded.
func gpuNodes(g *inventory.GPU) ([]devNode, error) {
	v, err := vendorOf(g)
	if err != nil {
		return nil, err
	}
	nodes, err := v.GPUNodes(g)
	if err != nil {
		return nil, fmt.Errorf("GPU %s: %w", g.UUID, err)
	}
	out := devNodes(nodes)
	for i := range g.Partitions {
		p, err := partitionNodes(g, &g.Partitions[i])
		if err != nil {
			return nil, err
		}
		out = append(out, p...)
	}
	return out, nil
}

// partitionNodes lists the nodes one partition adds: a MIG instance its GI
// and CI access capabilities, an AMD compute partition its own DRM nodes.
func partitionNodes(g *inventory.GPU, p *inventory.Partition) ([]devNode, error) {
	v, err := vendorOf(g)
	if err != nil {
		return nil, err
	}
	nodes, err := v.PartitionNodes(g, p)
	if err != nil {
		return nil, fmt.Errorf("GPU %s: %w", g.UUID, err)
	}
	return devNodes(nodes), nil
}

// nodeDevices lists every node the node's current state needs: each GPU's
// and partition's, then per vendor present its common and host nodes.
func nodeDevices(n *inventory.Node) ([]devNode, error) {
	byVendor := map[inventory.Vendor][]*inventory.GPU{}
	var out []devNode
	for i := range n.GPUs {
		g := &n.GPUs[i]
		nodes, err := gpuNodes(g)
		if err != nil {
			return nil, err
		}
		out = append(out, nodes...)
		byVendor[g.Vendor] = append(byVendor[g.Vendor], g)
	}
	for _, v := range vendors.All() {
		if gpus := byVendor[v.Name()]; len(gpus) > 0 {
			out = append(out, devNodes(v.CommonNodes())...)
			out = append(out, devNodes(v.HostNodes(gpus))...)
		}
	}
	return out, nil
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
