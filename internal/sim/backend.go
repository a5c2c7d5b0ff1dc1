package sim

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/mps"
	"github.com/tessera-gpu/tessera/internal/vfio/simfs"
)

var _ backend.Backend = (*Backend)(nil)

// Backend is the simulated backend: a Machine with live partition state,
// persisted in a state directory, and a private device tree.
type Backend struct {
	machine  *Machine
	stateDir string
	bootID   string
	devs     *devTree
	logger   klog.Logger

	// clock tells when a mode change is done (modes.go).
	clock clock.PassiveClock
	// pci is the node's PCI sysfs (pci.go).
	pci *simfs.Tree

	mu       sync.Mutex
	node     inventory.Node        // current state; GPUs in machine file order
	pending  map[string]ModeChange // mode changes not yet enumerated, by GPU UUID
	serial   uint64                // partitions created so far (seeds UUIDs)
	changes  uint64                // creates and destroys by this process (Generation)
	inUse    map[string]bool       // partition UUIDs held outside the driver (state.go)
	watchers map[*watcher]struct{}
	// numbers is every device node of the state by path (DeviceNumbers),
	// nil until asked after a change: each save drops it.
	numbers map[string]devNode

	// mpsRoot and mpsControl configure mps (WithMPS); nil mps: no MPS.
	mpsRoot    string
	mpsControl []string
	mpsLaunch  mps.Launcher
	mps        *mps.Manager
}

// Option configures New.
type Option func(*Backend)

// WithBootID replaces the node's boot id (bootid.go: otherwise
// <stateDir>/boot_id, else the host's): tests use it to simulate a reboot.
func WithBootID(id string) Option { return func(b *Backend) { b.bootID = id } }

// WithClock replaces the clock that tells when a mode change is done
// (modes.go): tests pass a fake one to step through the change.
func WithClock(c clock.PassiveClock) Option { return func(b *Backend) { b.clock = c } }

// WithLogger sets the logger New and the backend's background work use;
// calls that take a context log through klog.FromContext instead.
func WithLogger(l klog.Logger) Option { return func(b *Backend) { b.logger = l } }

// WithMPS lets the backend run MPS control daemons (sharing.go): one per
// claim under root, with control as the control program's argv, e.g.
// ["/usr/local/bin/tessera-sim", "mps-control"] for the stand-in (internal/sim/standin).
// Without it StartMPS fails.
func WithMPS(root string, control []string) Option {
	return func(b *Backend) { b.mpsRoot, b.mpsControl = root, slices.Clone(control) }
}

// WithMPSLauncher runs WithMPS's daemons through l (internal/mps/daemonpod: as
// pods of the node) instead of as the agent's own detached children.
func WithMPSLauncher(l mps.Launcher) Option { return func(b *Backend) { b.mpsLaunch = l } }

// New starts a backend for m that keeps its state in stateDir (created if
// missing): state.json and the device tree under dev/. Partitions recorded
// there under the current boot id are restored; otherwise the machine
// file's partitions are.
func New(m *Machine, stateDir string, opts ...Option) (*Backend, error) {
	if m == nil {
		return nil, fmt.Errorf("sim: no machine")
	}
	b := &Backend{machine: m, stateDir: stateDir, logger: klog.Background(), watchers: map[*watcher]struct{}{}, clock: clock.RealClock{}, pending: map[string]ModeChange{}}
	for _, o := range opts {
		o(b)
	}
	b.logger = klog.LoggerWithValues(b.logger, "backend", "sim", "machine", m.Name)
	if b.bootID == "" {
		id, err := ReadBootID(stateDir)
		if err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		b.bootID = id
	}
	// CDI specs need absolute host paths, so DevRoot must be absolute.
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return nil, fmt.Errorf("sim: state directory: %w", err)
	}
	b.stateDir, stateDir = abs, abs
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, fmt.Errorf("sim: creating state directory: %w", err)
	}
	b.devs = &devTree{root: filepath.Join(stateDir, "dev")}
	if err := writeCgroup(b.CgroupRoot(), m.Cgroup, &m.Node); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if err := writeProc(b.ProcRoot(), &m.Node); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if b.mpsRoot != "" || b.mpsControl != nil {
		if b.mps, err = mps.New(mps.Config{Root: b.mpsRoot, Control: b.mpsControl, Logger: b.logger, BootID: b.bootID, Launcher: b.mpsLaunch, Protocol: mpsProtocol(&m.Node)}); err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
	}

	b.node = *m.Node.Clone()
	gpus, serial, inUse, pending := loadState(b.logger, stateDir, m, b.bootID)
	if gpus != nil {
		b.node.GPUs = gpus
	}
	maps.Copy(b.pending, pending)
	b.settle(b.logger)
	b.serial, b.inUse = serial, inUse
	if err := b.save(); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if err := b.openPCI(gpus != nil); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	nodes, err := nodeDevices(&b.node)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	vn, err := b.vfioNodes()
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	nodes = append(nodes, vn...)
	if err := b.devs.reset(b.logger, nodes); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	b.logger.V(1).Info("Simulated backend ready", "gpus", len(b.node.GPUs), "stateDir", stateDir)
	return b, nil
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return "sim" }

// BootID is the simulated node's boot id (bootid.go), which the agent
// records in its checkpoint in place of the host's.
func (b *Backend) BootID() string { return b.bootID }

// Machine returns the machine the backend simulates (do not modify it).
func (b *Backend) Machine() *Machine { return b.machine }

// Discover implements backend.Backend: a deep copy of the current state,
// without the GPUs their host driver does not hold (pci.go), as NVML and
// amdgpu list them.
func (b *Backend) Discover(ctx context.Context) (*inventory.Node, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.settle(klog.FromContext(ctx))
	n := b.node.Clone()
	index := make([]int, len(n.GPUs)) // new index of GPU i; -1: left out
	var kept []inventory.GPU
	for i := range n.GPUs {
		ok, err := b.onDriver(&n.GPUs[i])
		if err != nil {
			return nil, err
		}
		index[i] = -1
		if ok {
			n.GPUs[i].Simulated = true
			index[i] = len(kept)
			kept = append(kept, n.GPUs[i])
		}
	}
	if len(kept) < len(n.GPUs) {
		n.Links = linksAmong(n.Links, index)
	}
	n.GPUs = kept
	return n, nil
}

// DevRoot implements backend.Backend: stateDir/dev.
func (b *Backend) DevRoot() string { return b.devs.root }

// DeviceNumbers implements backend.Backend. It knows every node the
// simulated hardware has right now, so CDI specs carry the numbers and
// resolve even where the tree holds stand-in files.
func (b *Backend) DeviceNumbers(devPath string) (major, minor int64, ok bool) {
	devPath = strings.TrimPrefix(filepath.ToSlash(filepath.Clean(devPath)), "/dev/")
	if strings.HasPrefix(devPath, "vfio/") {
		return b.vfioNumbers(devPath)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.settle(b.logger)
	if b.numbers == nil {
		// The state always has its nodes: New made them, and a partition
		// whose nodes the vendor refuses is never created. Kept until the
		// next change: a prepare asks for each node its spec names, and the
		// hardware's own backends answer without work.
		nodes, _ := nodeDevices(&b.node)
		b.numbers = make(map[string]devNode, len(nodes))
		for _, n := range nodes {
			b.numbers[n.path] = n
		}
	}
	n, ok := b.numbers[devPath]
	return n.major, n.minor, ok
}

// CreatePartition implements backend.Backend with the hardware's rules:
// the profile must be in the GPU's table, the start one of the profile's
// placements, the slices free and partitioning enabled. On any failure
// nothing changes.
func (b *Backend) CreatePartition(ctx context.Context, gpuUUID, profile string, placement inventory.Placement) (*inventory.Partition, error) {
	logger := klog.FromContext(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	g, err := b.gpu(gpuUUID)
	if err != nil {
		return nil, err
	}
	if err := b.reachable(g); err != nil {
		return nil, err
	}
	p, err := planPartition(g, profile, placement)
	if err != nil {
		return nil, fmt.Errorf("sim: creating partition: %w", err)
	}
	if p.GPUInstanceID, err = gpuInstanceID(g, p.Placement); err != nil {
		return nil, fmt.Errorf("sim: creating partition: %w", err)
	}
	p.UUID = partitionUUID(p.Kind, g.UUID, b.bootID, strconv.FormatUint(b.serial, 10), strconv.FormatInt(time.Now().UnixNano(), 10))
	if p.Kind == inventory.PartitionXCP {
		p.Minor, p.RenderMinor = xcpMinors(&b.node, g, p.GPUInstanceID)
		p.MemoryPartitionMode = g.Partitioning.MemoryMode
	}
	nodes, err := partitionNodes(g, &p)
	if err != nil {
		return nil, fmt.Errorf("sim: creating partition: %w", err)
	}
	if err := b.devs.create(logger, nodes); err != nil {
		return nil, fmt.Errorf("sim: creating partition: %w", err)
	}
	before := g.Partitions
	g.Partitions = append(slices.Clone(before), p)
	sortPartitions(g.Partitions)
	b.serial++
	if err := b.save(); err != nil {
		g.Partitions = before
		b.serial--
		b.devs.remove(logger, nodes)
		return nil, fmt.Errorf("sim: creating partition: %w", err)
	}
	b.changes++
	logger.V(2).Info("Created partition", "gpu", gpuUUID, "profile", profile, "placement", fmt.Sprintf("%d:%d", p.Placement.Start, p.Placement.Size), "uuid", p.UUID, "gpuInstance", p.GPUInstanceID)
	out := p.Clone()
	return &out, nil
}

// DestroyPartition implements backend.Backend; a partition that does not
// exist is not an error, an unknown GPU is.
func (b *Backend) DestroyPartition(ctx context.Context, gpuUUID, partitionUUID string) error {
	logger := klog.FromContext(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	g, err := b.gpu(gpuUUID)
	if err != nil {
		return err
	}
	if err := b.reachable(g); err != nil {
		return err
	}
	k := slices.IndexFunc(g.Partitions, func(p inventory.Partition) bool { return p.UUID == partitionUUID })
	if k < 0 {
		logger.V(4).Info("Partition to destroy does not exist", "gpu", gpuUUID, "uuid", partitionUUID)
		return nil
	}
	if b.inUse[partitionUUID] {
		return fmt.Errorf("sim: partition %s on GPU %s is in use by a process outside the driver (NVML would return IN_USE)", partitionUUID, gpuUUID)
	}
	before := g.Partitions
	gone := before[k]
	g.Partitions = slices.Delete(slices.Clone(before), k, k+1)
	if err := b.save(); err != nil {
		g.Partitions = before
		return fmt.Errorf("sim: destroying partition: %w", err)
	}
	if nodes, err := partitionNodes(g, &gone); err != nil {
		logger.Error(err, "Removing the destroyed partition's device nodes", "gpu", gpuUUID, "uuid", partitionUUID)
	} else if own, err := gpuNodes(&inventory.GPU{Vendor: g.Vendor, UUID: g.UUID, Minor: g.Minor, RenderMinor: g.RenderMinor}); err == nil {
		// An AMD partition 0 has the GPU's own nodes, which stay.
		b.devs.remove(logger, missing(nodes, own))
	}
	b.changes++
	logger.V(2).Info("Destroyed partition", "gpu", gpuUUID, "profile", gone.Profile, "uuid", partitionUUID)
	return nil
}

// SetPartitionMode implements backend.Backend like the hardware: Hopper and
// newer switch MIG mode on the spot when no partition exists; a GPU whose
// mode change needs a reset (A100 class) refuses, since the driver never
// resets a GPU. AMD compute partition modes are not switched here.
func (b *Backend) SetPartitionMode(ctx context.Context, gpuUUID string, enabled bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	g, err := b.gpu(gpuUUID)
	if err != nil {
		return err
	}
	if err := b.reachable(g); err != nil {
		return err
	}
	pt := g.Partitioning
	switch {
	case pt == nil:
		return fmt.Errorf("sim: GPU %s (%s) cannot be partitioned", gpuUUID, g.ProductName)
	case pt.Enabled == enabled:
		return nil
	case pt.Kind != inventory.PartitionMIG:
		return fmt.Errorf("sim: GPU %s (%s): the %s mode is set by the amdgpu driver, not per claim", gpuUUID, g.ProductName, pt.Kind)
	case pt.ModeChangeNeedsReset:
		return fmt.Errorf("sim: GPU %s (%s): changing MIG mode needs a GPU reset, which the driver does not do", gpuUUID, g.ProductName)
	case !enabled && len(g.Partitions) > 0:
		return fmt.Errorf("sim: GPU %s (%s): cannot disable MIG mode while %d partition(s) exist", gpuUUID, g.ProductName, len(g.Partitions))
	}
	pt.Enabled = enabled
	if err := b.save(); err != nil {
		pt.Enabled = !enabled
		return fmt.Errorf("sim: setting MIG mode: %w", err)
	}
	b.changes++
	klog.FromContext(ctx).V(2).Info("Set partition mode", "gpu", gpuUUID, "enabled", enabled)
	return nil
}

// Generation implements backend.Generationer: it changes whenever a
// partition is created or destroyed, or a driver binding moves, as the
// inventory does.
func (b *Backend) Generation() (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.settle(b.logger)
	return fmt.Sprintf("%d.%d", b.changes, b.pci.Writes()), nil
}

// gpu returns the live GPU with uuid; the caller holds mu.
func (b *Backend) gpu(uuid string) (*inventory.GPU, error) {
	i := slices.IndexFunc(b.node.GPUs, func(g inventory.GPU) bool { return g.UUID == uuid })
	if i < 0 {
		return nil, fmt.Errorf("sim: no GPU with UUID %q on this node", uuid)
	}
	return &b.node.GPUs[i], nil
}

// save persists the current state; the caller holds mu (or is New).
func (b *Backend) save() error {
	b.numbers = nil
	doc := stateDoc{Version: stateVersion, BootID: b.bootID, Machine: b.machine.Name, NodeName: b.machine.NodeName, Serial: b.serial}
	for _, g := range b.node.GPUs {
		sg := GPUState{UUID: g.UUID, PCIBusID: g.PCIBusID, Partitions: g.Partitions, TimeSlice: g.TimeSlice}
		if g.Partitioning != nil {
			sg.PartitioningEnabled = &g.Partitioning.Enabled
		}
		if c, ok := b.pending[g.UUID]; ok {
			sg.ModeChange = &c
		}
		for _, p := range g.Partitions {
			if b.inUse[p.UUID] {
				sg.InUse = append(sg.InUse, p.UUID)
			}
		}
		doc.GPUs = append(doc.GPUs, sg)
	}
	return saveState(b.stateDir, &doc)
}
