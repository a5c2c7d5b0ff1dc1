package claims

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/clock"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/cdi"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/isolation"
	"github.com/tessera-gpu/tessera/internal/keyed"
	"github.com/tessera-gpu/tessera/internal/memlimit"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sharing"
	"github.com/tessera-gpu/tessera/internal/vfio"
)

// crashStep names a point in prepare or unprepare where a test may stop the agent.
type crashStep string

const (
	stepPrepareStarted    crashStep = "prepare-started-saved"
	stepPartitionCarved   crashStep = "partition-carved"
	stepSharingApplied    crashStep = "sharing-applied"
	stepSpecWritten       crashStep = "spec-written"
	stepPrepareCompleted  crashStep = "prepare-completed-saved"
	stepUnprepareStarted  crashStep = "unprepare-started-saved"
	stepSpecRemoved       crashStep = "spec-removed"
	stepLimitsReleased    crashStep = "memory-limits-released"
	stepUnprepareFinished crashStep = "unprepare-entry-deleted"
)

// errInjected is returned by a crash hook to stop at a step.
var errInjected = errors.New("injected stop")

// Config wires a Manager.
type Config struct {
	DriverName string
	Backend    backend.Backend
	CDI        *cdi.Writer
	Store      *checkpoint.Store
	BootID     string
	// Devices returns the devices now published by this node.
	Devices func() *publish.Result
	// ObservePartition, if set, is told of every backend partition call and
	// how long it took (metrics).
	ObservePartition func(op PartitionOp, took time.Duration, err error)
	// OrphanDestroyed, if set, is told of each partition the start-up sweep
	// destroyed (metrics).
	OrphanDestroyed func()
	// MPSRestarted, if set, is told how many MPS daemons of prepared claims
	// were found dead and started again (metrics).
	MPSRestarted func(n int)
	// GetClaim, if set, GETs a ResourceClaim from the API server by
	// namespace and name. A prepare refused because a prepared claim holds
	// a device it needs asks it about that claim, and releases one that is
	// gone (stale.go); unset, such a prepare is refused.
	GetClaim func(ctx context.Context, namespace, name string) (*resourceapi.ResourceClaim, error)
	// Released, if set, is told of each prepared claim released for
	// another claim allocated its devices (its UID and name), and on what
	// evidence: metrics, and files of the claim that are not the manager's
	// (device metadata), which no unprepare will remove.
	Released func(ev Evidence, uid string, claim ClaimRef)
	// Partitioning is how the node publishes MIG GPUs; with Dynamic the
	// manager carves at prepare, destroys at unprepare and removes
	// partitions no claim owns at start (effect_partitions.go).
	Partitioning publish.Partitioning
	// Isolation, if set, is how a share of the device would be held
	// (internal/isolation), as the device was published; assessed once per
	// spec written: the memory limit's hooks follow it, and a prepare's
	// result carries it (Device.Isolation). Unset: held by nothing.
	Isolation func(gpu *inventory.GPU, p *inventory.Partition) isolation.Assessment
	// MemoryLimits, if set, is the node's kernel memory limit hook
	// (effect_memlimits.go); unset where no hook is installed.
	MemoryLimits *MemoryLimits
	// IMEX, if set, is what the node offers for claims of IMEX channels
	// (channel.go); unset, such a claim fails.
	IMEX *IMEX
	// ModeClock paces the wait for a new partition mode's partitions to
	// appear (modes.go); unset, the real clock.
	ModeClock clock.WithTicker
	// ModeChangeTimeout bounds that wait; 0 is DefaultModeChangeTimeout.
	ModeChangeTimeout time.Duration
	// VFIO is the node's PCI sysfs, through which GPUs are passed through
	// to virtual machines and given back (effect_vfio.go, docs/vfio.md).
	// Set whatever Passthrough says, so that GPUs passed before a restart
	// with passthrough off still go back to their drivers.
	VFIO vfio.Sysfs
	// Passthrough lets claims of the vfio class pass GPUs through
	// (names.VFIOClass); off, such a claim is refused.
	Passthrough bool
	// DeviceMetadata gives each prepared Device its Metadata (metadata.go).
	DeviceMetadata bool
}

// MemoryLimits is how shares' memory is held in the kernel.
type MemoryLimits struct {
	// Hook is what the specs run (internal/memlimit).
	Hook memlimit.Hook
	// Release forgets the kernel memory limits that containers of the
	// claim held and whose poststop hook never ran (the runtime died
	// first). It must be idempotent.
	Release func(claimUID string) error
}

// Device is one prepared device, as the kubelet plugin returns it.
type Device struct {
	Requests     []string
	Pool, Name   string
	CDIDeviceIDs []string
	// ShareID is the allocation's ShareID on a multi-allocatable device.
	ShareID string
	// Share is what the claim holds of a shared device (nil: all of it).
	Share *sharing.Share
	// Isolation is how the share is held, as assessed when its spec was
	// written (Config.Isolation); set by Prepare for a share only.
	Isolation *isolation.Assessment
	// Metadata are the device's attributes for the file the kubelet mounts
	// into its containers (metadata.go); nil unless Config.DeviceMetadata.
	Metadata map[string]resourceapi.DeviceAttribute
}

// Manager prepares and unprepares claims. It is safe for concurrent use:
// operations on one claim are serialised; claims without side effects on
// the node (no partition to carve, no interval or MPS daemon) go in
// parallel, holding m.mu only to check and record, and share checkpoint
// writes (commit.go); the others hold m.mu throughout, as they change
// state other claims read (partitions, MIG mode, intervals, daemons).
type Manager struct {
	cfg Config
	// mu guards cp, dirty, all and version.
	mu sync.Mutex
	cp *checkpoint.Checkpoint
	// dirty are the claims changed since the last publish, by UID; all:
	// the next publish is of the whole state (commit.go).
	dirty map[string]struct{}
	all   bool
	// version counts published states; pending is what was published and
	// not yet written (pendMu).
	version uint64
	pendMu  sync.Mutex
	pending *batch
	// saveMu orders checkpoint writes; written is the version on disk.
	saveMu  sync.Mutex
	written uint64
	// claimLocks serialises operations on one claim (by UID).
	claimLocks keyed.Mutex
	// imexMu serialises starting the node's IMEX daemon for a channel's
	// claim, up to its entry, with stopping it when idle (imexdaemon.go),
	// so that a stop never takes the daemon a prepare just started.
	imexMu sync.Mutex
	// passChanges counts GPUs passed through or given back
	// (PassthroughChanges), read without mu.
	passChanges atomic.Uint64
	// crashHook, set only by this package's tests (newManager), is called
	// after each step; a non-nil error stops the operation there as if the
	// process had died.
	crashHook func(crashStep) error
}

// New loads the checkpoint and recovers from whatever a previous process left.
func New(ctx context.Context, cfg Config) (*Manager, error) {
	return newManager(ctx, cfg, nil)
}

// newManager is New with a crash hook (tests).
func newManager(ctx context.Context, cfg Config, crash func(crashStep) error) (*Manager, error) {
	m := &Manager{cfg: cfg, crashHook: crash}
	if err := m.recover(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// Close is for a graceful stop, once no call is in flight: it leaves the
// newest state in both checkpoint files, so an agent from before the two
// files (checkpoint.Store), should the node be downgraded, reads it.
func (m *Manager) Close() error {
	return m.cfg.Store.Mirror()
}

// Counts returns how many claims are prepared (PrepareCompleted) and how
// many devices they hold: the metrics' view, without copying the checkpoint.
func (m *Manager) Counts() (claims, devices int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.cp.Claims {
		if c.State == checkpoint.PrepareCompleted {
			claims++
			devices += len(c.Devices)
		}
	}
	return claims, devices
}

func (m *Manager) crash(s crashStep) error {
	if m.crashHook == nil {
		return nil
	}
	if err := m.crashHook(s); err != nil {
		return fmt.Errorf("at %s: %w", s, err)
	}
	return nil
}

func devicesOf(c *checkpoint.Claim) []Device {
	out := make([]Device, 0, len(c.Devices))
	for _, d := range c.Devices {
		dv := Device{Requests: []string{d.Request}, Pool: d.Pool, Name: d.Device, CDIDeviceIDs: append([]string(nil), d.CDIDeviceIDs...), ShareID: d.ShareID}
		if d.Sharing.IsShare() {
			sh := *d.Sharing.Share
			dv.Share = &sh
		}
		out = append(out, dv)
	}
	return out
}
