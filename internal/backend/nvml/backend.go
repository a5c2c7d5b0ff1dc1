//go:build cgo && linux

package nvml

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/gpuvendor/nvidia"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/isolation"
	"github.com/tessera-gpu/tessera/internal/mps"
)

// Options configure New.
type Options struct {
	// Lib is the NVML library; nil means the host's libnvidia-ml through
	// nvml.New(). Tests pass go-nvml's mock servers.
	Lib nvml.Interface
	// LibraryPath is the libnvidia-ml to load when Lib is nil (found under
	// the driver root, internal/driverroot); empty: libnvidia-ml.so.1 by
	// the dynamic loader's search.
	LibraryPath string
	// SysfsRoot is the directory that holds the host's sys/ tree ("/" when
	// empty), for PCIe roots and NUMA nodes, which NVML does not report.
	SysfsRoot string
	Logger    klog.Logger

	// NvidiaSMI is the nvidia-smi that SetTimeSlice runs ("nvidia-smi",
	// looked up in PATH, when empty).
	NvidiaSMI string
	// MPSControl is the argv of NVIDIA's MPS control program
	// (["nvidia-cuda-mps-control"] when empty).
	MPSControl []string
	// MPSLibraryPath is the MPS daemons' LD_LIBRARY_PATH: the driver
	// root's library directory, where the MPS server finds libcuda (empty:
	// the loader's default search).
	MPSLibraryPath string
	// MPSRoot holds one directory per MPS daemon, its pipes and logs
	// ("/var/run/tessera/mps" when empty; created on first use).
	MPSRoot string
	// MPSLauncher runs the MPS daemons (nil: as the agent's own detached
	// children; internal/mps/daemonpod: as pods of the node).
	MPSLauncher mps.Launcher

	// HealthPollInterval is how often WatchHealth probes every GPU and
	// reads its ECC, row-remap and retired-page counters (30 s when zero).
	// XID and ECC events arrive as they happen, whatever it is.
	HealthPollInterval time.Duration
}

// Backend is the NVIDIA backend. It holds one NVML session from New to
// Close: nvmlInit is expensive (it opens every GPU) and device handles stay
// valid for the session, so they are looked up once and reused.
type Backend struct {
	lib    nvml.Interface
	sys    sysfs
	logger klog.Logger
	smi    string       // nvidia-smi (sharing.go)
	mps    *mps.Manager // MPS control daemons (sharing.go)
	// healthPoll is WatchHealth's poll interval (health.go).
	healthPoll time.Duration

	mu      sync.Mutex
	handles []nvml.Device // by NVML index; nil where the lookup failed
	// handleErrs is why a handle lookup failed, by NVML index.
	handleErrs map[int]error
	// ids are the identities read at discovery, by NVML index, for a GPU
	// that is lost later (lost.go).
	ids map[int]identity
	// said holds what was last logged of a GPU's health or absence, so
	// each is logged once, not at every Discover (lost.go).
	said   map[string]string
	closed bool
	// changes counts partition and mode calls by this process, failed ones
	// too (they may have changed something), and DestroyStray calls that
	// destroyed something: the Generation the agent polls.
	changes uint64
}

var _ backend.Backend = (*Backend)(nil)

// New opens the NVML session. A host without libnvidia-ml is a startup
// error that says so, not an empty node.
func New(o Options) (*Backend, error) {
	lib := o.Lib
	if lib == nil {
		lib = newLib(o.LibraryPath)
	}
	root := o.SysfsRoot
	if root == "" {
		root = "/"
	}
	logger := klog.LoggerWithValues(o.Logger, "backend", "nvml")
	smi, control, mpsRoot := o.NvidiaSMI, o.MPSControl, o.MPSRoot
	if smi == "" {
		smi = defaultNvidiaSMI
	}
	if len(control) == 0 {
		control = defaultMPSControl
	}
	if mpsRoot == "" {
		mpsRoot = defaultMPSRoot
	}
	if err := initLib(lib); err != nil {
		return nil, err
	}
	// MPS v3 or legacy: the node's driver decides (every GPU has the same).
	protocol := 0
	if v, ret := lib.SystemGetDriverVersion(); ret == nvml.SUCCESS && isolation.MPSNamespaces(nvidia.Vendor{}.Capabilities(), &inventory.GPU{DriverVersion: driverSemver(v)}) {
		protocol = mps.Protocol3
	}
	daemons, err := mps.New(mps.Config{Root: mpsRoot, Control: control, LibraryPath: o.MPSLibraryPath, Logger: logger, Launcher: o.MPSLauncher, Protocol: protocol})
	if err != nil {
		_ = lib.Shutdown()
		return nil, fmt.Errorf("nvml: %w", err)
	}
	poll := o.HealthPollInterval
	if poll <= 0 {
		poll = defaultHealthPoll
	}
	b := &Backend{lib: lib, sys: sysfs{root: root}, logger: logger, smi: smi, mps: daemons, healthPoll: poll,
		handleErrs: map[int]error{}, said: map[string]string{}}
	n, ret := lib.DeviceGetCount()
	if err := check("nvmlDeviceGetCount", ret); err != nil {
		_ = lib.Shutdown()
		return nil, fmt.Errorf("nvml: %w", err)
	}
	b.handles = make([]nvml.Device, n)
	b.refreshHandles()
	return b, nil
}

// initLib starts NVML and explains the one failure operators meet most.
func initLib(lib nvml.Interface) error {
	ret := lib.Init()
	switch ret {
	case nvml.SUCCESS:
		return nil
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		if p := libraryPath(lib); p != "" {
			return fmt.Errorf("nvml: %s could not be loaded (see the agent's log for the loader's reason): check --nvidia-driver-root", p)
		}
		return errors.New("nvml: libnvidia-ml.so.1 not found: install the NVIDIA driver on the host " +
			"and make its libraries visible to the plugin (or choose another --backend)")
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return fmt.Errorf("nvml: init: the NVIDIA kernel driver is not loaded: %w", check("nvmlInit", ret))
	default:
		return fmt.Errorf("nvml: init: %w", check("nvmlInit", ret))
	}
}

// refreshHandles looks up the handles not cached yet. A GPU whose handle
// fails (lost, or fallen off the bus) is kept in handleErrs, which Discover
// reports (once), and retried on the next call; the others are unaffected.
// Callers hold b.mu (or own b).
func (b *Backend) refreshHandles() {
	for i := range b.handles {
		if b.handles[i] != nil {
			continue
		}
		d, ret := b.lib.DeviceGetHandleByIndex(i)
		if err := check(fmt.Sprintf("nvmlDeviceGetHandleByIndex(%d)", i), ret); err != nil {
			b.handleErrs[i] = err
			continue
		}
		delete(b.handleErrs, i)
		b.handles[i] = d
	}
}

// Close ends the NVML session. Calling it twice is harmless.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	b.handles = nil
	if err := check("nvmlShutdown", b.lib.Shutdown()); err != nil {
		return fmt.Errorf("nvml: %w", err)
	}
	return nil
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return "nvml" }

// DevRoot implements backend.Backend: real device nodes live in /dev.
func (b *Backend) DevRoot() string { return "/dev" }

// DeviceNumbers implements backend.Backend: the container runtime stats the
// host's real nodes, which is always right on hardware.
func (b *Backend) DeviceNumbers(string) (major, minor int64, ok bool) { return 0, 0, false }

// Discover implements backend.Backend. GPUs are in NVML index order; one
// GPU failing drops or degrades that GPU only (see gpu.go).
func (b *Backend) Discover(ctx context.Context) (*inventory.Node, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errors.New("nvml: backend is closed")
	}
	b.refreshHandles()
	driver, ret := b.lib.SystemGetDriverVersion()
	if err := check("nvmlSystemGetDriverVersion", ret); err != nil {
		// Every GPU shares the one driver, so this is node-wide.
		return nil, fmt.Errorf("nvml: %w", err)
	}
	node := &inventory.Node{}
	var found []nvml.Device // parallel to node.GPUs
	for i, h := range b.handles {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if h == nil {
			b.leaveOut(node, unpublished(i, b.handleErrs[i]))
			continue
		}
		g, err := b.readGPU(i, h, driver)
		if err != nil {
			b.leaveOut(node, unpublished(i, err))
			continue
		}
		if why := nothingToPublish(g); why != "" {
			// Kept in the inventory (its place in the gpu-<n> order, its
			// health) though no device comes of it.
			b.leaveOut(node, inventory.Unpublished{GPU: g.UUID, Reason: inventory.UnpublishedNoProfiles, Message: why})
		}
		node.GPUs = append(node.GPUs, *g)
		found = append(found, h)
	}
	node.Links = b.links(node, found)
	return node, nil
}

// CreatePartition, DestroyPartition, SetPartitionMode, DestroyStray and
// WatchHealth are in carve.go, destroy.go, migmode.go, stray.go and
// health.go.

// CUDADriverVersion is the CUDA version the driver supports ("13.0"). The
// inventory has no field for it yet, so it is offered here for the agent.
func (b *Backend) CUDADriverVersion() (string, error) {
	v, ret := b.lib.SystemGetCudaDriverVersion()
	if err := check("nvmlSystemGetCudaDriverVersion", ret); err != nil {
		return "", fmt.Errorf("nvml: %w", err)
	}
	return cudaDriverVersion(v), nil
}
