// Package simfs is a PCI sysfs tree in a directory that behaves as the
// kernel's: its files and symlinks are laid out as /sys has them (devices
// below devices/, bus/pci/devices and each driver's directory linking to
// them, IOMMU groups below kernel/iommu_groups), and Write does what the
// kernel does when the attribute is written: driver_override is kept,
// bind and drivers_probe create the device's driver link, unbind removes
// it, and binding the first device of an IOMMU group to vfio-pci makes
// the group's /dev/vfio node appear. The simulator's nodes keep one in
// their state directory (internal/sim), and tests build small ones in
// t.TempDir(); internal/vfio reads and writes either as it does a host's.
//
// The tree on disk is the whole state: a Tree opened again over it (an
// agent restarted without a reboot) sees every binding as it was.
package simfs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/tessera-gpu/tessera/internal/pci"
)

// VFIODriver is the driver whose devices open their IOMMU group's node.
const VFIODriver = "vfio-pci"

// Function is one PCI function of a simulated host.
type Function struct {
	Address string // DDDD:BB:DD.F
	Class   int64  // 24-bit class code: 0x030200 a 3D controller
	Vendor  string // 0x10de
	Device  string // 0x2330
	// Driver is what the kernel binds at a probe (its ID table matches
	// the device): the function's driver at boot; "" for none.
	Driver string
	// Group is the function's IOMMU group; ignored on a host without an
	// IOMMU.
	Group int
	// Parent is the path below devices/ of what the function sits under:
	// its root complex and bridges ("pci0000:15/0000:16:01.0").
	Parent   string
	NUMANode int
}

// Host is a simulated host's PCI side.
type Host struct {
	// IOMMU: the kernel has IOMMU groups (VT-d or AMD-Vi on).
	IOMMU bool
	// VFIO: the vfio-pci driver is loaded.
	VFIO      bool
	Functions []Function
}

// Tree is a simulated host's sysfs.
type Tree struct {
	root string
	host Host
	fns  map[string]Function
	// nodes creates and removes an IOMMU group's /dev/vfio node.
	nodes func(group int, present bool) error
	// fault, when set, may refuse a write (tests): its error is returned
	// and nothing changes.
	fault  func(path, value string) error
	mu     sync.Mutex
	writes atomic.Uint64
}

// Option configures Build and Open.
type Option func(*Tree)

// WithGroupNodes has present true when IOMMU group g's node must exist
// (its first device was bound to vfio-pci) and false when it must go (its
// last one left vfio-pci).
func WithGroupNodes(f func(g int, present bool) error) Option {
	return func(t *Tree) { t.nodes = f }
}

// WithFault lets f refuse writes (tests): a non-nil error is what the
// write returns, and the tree does not change.
func WithFault(f func(path, value string) error) Option {
	return func(t *Tree) { t.fault = f }
}

// Build writes a fresh tree for h at root, every function on its
// default driver with no driver_override: the host as it boots.
func Build(root string, h Host, opts ...Option) (*Tree, error) {
	t, err := newTree(root, h, opts)
	if err != nil {
		return nil, err
	}
	if err := os.RemoveAll(root); err != nil {
		return nil, fmt.Errorf("simfs: clear %s: %w", root, err)
	}
	if err := t.write(); err != nil {
		return nil, fmt.Errorf("simfs: %w", err)
	}
	return t, nil
}

// Open takes over the tree for h at root as it is: the bindings an
// earlier process made stay. It fails where root holds no tree of h's
// functions; the caller builds one then.
func Open(root string, h Host, opts ...Option) (*Tree, error) {
	t, err := newTree(root, h, opts)
	if err != nil {
		return nil, err
	}
	for _, f := range h.Functions {
		if _, err := os.Stat(filepath.Join(root, t.devicePath(f))); err != nil {
			return nil, fmt.Errorf("simfs: %s is not a tree of this host: %w", root, err)
		}
	}
	return t, nil
}

func newTree(root string, h Host, opts []Option) (*Tree, error) {
	t := &Tree{root: root, host: h, fns: map[string]Function{}}
	for _, f := range h.Functions {
		a, err := pci.Normalize(f.Address)
		if err != nil {
			return nil, fmt.Errorf("simfs: %w", err)
		}
		if _, dup := t.fns[a]; dup {
			return nil, fmt.Errorf("simfs: function %s listed twice", a)
		}
		f.Address = a
		t.fns[a] = f
	}
	for _, o := range opts {
		o(t)
	}
	return t, nil
}

// Root implements vfio.Sysfs.
func (t *Tree) Root() string { return t.root }

// Writes counts the writes that changed a binding: the simulator's
// generation, which the agent polls to rediscover.
func (t *Tree) Writes() uint64 { return t.writes.Load() }

// Groups returns the IOMMU groups that have a device on vfio-pci now:
// those whose /dev/vfio node exists.
func (t *Tree) Groups() ([]int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []int
	for _, f := range t.sorted() {
		d, err := t.driver(f.Address)
		if err != nil {
			return nil, err
		}
		if d == VFIODriver && t.host.IOMMU && !slices.Contains(out, f.Group) {
			out = append(out, f.Group)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Driver is the driver bound to the function at addr now; "" for none.
func (t *Tree) Driver(addr string) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.driver(addr)
}

func (t *Tree) sorted() []Function {
	out := make([]Function, 0, len(t.fns))
	for _, f := range t.fns {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b Function) int {
		x, _ := pci.ParseBusID(a.Address)
		y, _ := pci.ParseBusID(b.Address)
		if x.Less(y) {
			return -1
		}
		return 1
	})
	return out
}

// devicePath is f's directory, relative to the root.
func (t *Tree) devicePath(f Function) string {
	return filepath.Join("devices", filepath.FromSlash(f.Parent), f.Address)
}

func groupDir(g int) string {
	return filepath.Join("kernel", "iommu_groups", strconv.Itoa(g))
}

// FileNodes keeps each bound group's node as an empty regular file below
// devRoot (tests; the simulator makes device nodes with numbers).
func FileNodes(devRoot string) func(g int, present bool) error {
	return func(g int, present bool) error {
		p := filepath.Join(devRoot, "vfio", strconv.Itoa(g))
		if !present {
			if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
				return err
			}
			return nil
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, nil, 0o666)
	}
}
