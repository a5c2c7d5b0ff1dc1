package claims

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/pkg/backend"
	"github.com/tessera-gpu/tessera/pkg/cdi"
	"github.com/tessera-gpu/tessera/pkg/checkpoint"
	"github.com/tessera-gpu/tessera/pkg/keyed"
	"github.com/tessera-gpu/tessera/pkg/publish"
	"github.com/tessera-gpu/tessera/pkg/sharing"
)

// Step names a point in prepare or unprepare where a test may stop the agent.
type Step string

const (
	StepPrepareStarted    Step = "prepare-started-saved"
	StepPartitionCarved   Step = "partition-carved"
	StepSharingApplied    Step = "sharing-applied"
	StepSpecWritten       Step = "spec-written"
	StepPrepareCompleted  Step = "prepare-completed-saved"
	StepUnprepareStarted  Step = "unprepare-started-saved"
	StepSpecRemoved       Step = "spec-removed"
	StepUnprepareFinished Step = "unprepare-entry-deleted"
)

// ErrInjected is returned by a crash hook to stop at a step.
var ErrInjected = errors.New("injected stop")

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
	// Partitioning is how the node publishes MIG GPUs; with Dynamic the
	// manager carves at prepare, destroys at unprepare and removes
	// partitions no claim owns at start (see carve.go).
	Partitioning publish.Partitioning
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
}

// Manager prepares and unprepares claims. It is safe for concurrent use:
// operations on one claim are serialised; claims without side effects on
// the node (no partition to carve, no interval or MPS daemon) go in
// parallel, holding m.mu only to check and record, and share checkpoint
// writes (commit.go); the others hold m.mu throughout, as they change
// state other claims read (partitions, MIG mode, intervals, daemons).
type Manager struct {
	cfg Config
	// mu guards cp, version and snap's publication.
	mu sync.Mutex
	cp *checkpoint.Checkpoint
	// version counts published states; snap is the newest (commit.go).
	version uint64
	snap    atomic.Pointer[snapshot]
	// saveMu orders checkpoint writes; written is the version on disk.
	saveMu  sync.Mutex
	written uint64
	// claimLocks serialises operations on one claim (by UID).
	claimLocks keyed.Mutex
	// crashHook, set only by this package's tests (newManager), is called
	// after each step; a non-nil error stops the operation there as if the
	// process had died.
	crashHook func(Step) error
}

// New loads the checkpoint and recovers from whatever a previous process left.
func New(ctx context.Context, cfg Config) (*Manager, error) {
	return newManager(ctx, cfg, nil)
}

// newManager is New with a crash hook (tests).
func newManager(ctx context.Context, cfg Config, crash func(Step) error) (*Manager, error) {
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

// Prepared returns the UIDs of claims now prepared, for tests and metrics.
func (m *Manager) Prepared() map[string]checkpoint.Claim {
	m.mu.Lock()
	cp := m.cp.Clone()
	m.mu.Unlock()
	out := map[string]checkpoint.Claim{}
	for uid, c := range cp.Claims {
		out[uid] = *c
	}
	return out
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

func (m *Manager) crash(s Step) error {
	if m.crashHook == nil {
		return nil
	}
	if err := m.crashHook(s); err != nil {
		return fmt.Errorf("at %s: %w", s, err)
	}
	return nil
}

// Prepare prepares one claim and returns its devices. It is idempotent: a
// claim already prepared returns what was prepared before.
func (m *Manager) Prepare(ctx context.Context, claim *resourceapi.ResourceClaim) ([]Device, error) {
	defer m.claimLocks.Lock(string(claim.UID))()
	m.mu.Lock()
	locked := true
	defer func() {
		if locked {
			m.mu.Unlock()
		}
	}()
	ref := cdi.ClaimRef{UID: string(claim.UID), Namespace: claim.Namespace, Name: claim.Name}
	logger := klog.FromContext(ctx).WithValues("claim", klog.KObj(claim), "uid", claim.UID)

	if c, ok := m.cp.Claims[ref.UID]; ok && c.State == checkpoint.PrepareCompleted && !lostPartitions(c) {
		if err := m.ensureSpec(ctx, ref, c); err != nil {
			return nil, fmt.Errorf("prepare claim %s: %w", ref, err)
		}
		if c.Unconfirmed {
			prev := m.cp.Clone()
			c.Unconfirmed = false
			if err := m.save(prev); err != nil {
				return nil, fmt.Errorf("prepare claim %s: %w", ref, err)
			}
		}
		logger.V(4).Info("Claim already prepared")
		return devicesOf(c), nil
	}
	if c, ok := m.cp.Claims[ref.UID]; ok {
		// A half-done prepare or unprepare of this claim from a failed call,
		// or partitions a reboot took: undo it, then prepare from scratch.
		if err := m.rollback(ctx, c); err != nil {
			return nil, fmt.Errorf("prepare claim %s: clean up earlier attempt: %w", ref, err)
		}
	}

	devs, err := m.resolve(claim)
	if err != nil {
		return nil, fmt.Errorf("prepare claim %s: %w", ref, err)
	}
	if err := m.yieldUnconfirmed(ctx, ref, devs); err != nil {
		return nil, fmt.Errorf("prepare claim %s: %w", ref, err)
	}
	if err := m.checkConflicts(ref, devs); err != nil {
		return nil, fmt.Errorf("prepare claim %s: %w", ref, err)
	}
	if err := m.checkEffects(ref.UID, devs); err != nil {
		return nil, fmt.Errorf("prepare claim %s: %w", ref, err)
	}
	if err := m.checkShares(ref.UID, devs); err != nil {
		return nil, fmt.Errorf("prepare claim %s: %w", ref, err)
	}

	entry := &checkpoint.Claim{UID: ref.UID, Namespace: ref.Namespace, Name: ref.Name, State: checkpoint.PrepareStarted, Updated: time.Now()}
	if !m.plan(entry, devs) {
		// Recorded in memory only: it reserves the devices against other
		// claims; a crash before the spec and the entry are saved leaves
		// nothing behind, or a spec that the start-up sweep removes.
		m.cp.Claims[ref.UID] = entry
		m.mu.Unlock()
		locked = false
		return m.preparePlain(ctx, logger, ref, entry, devs)
	}
	prev := m.cp.Clone()
	m.cp.Claims[ref.UID] = entry
	if err := m.save(prev); err != nil {
		return nil, fmt.Errorf("prepare claim %s: %w", ref, err)
	}
	if err := m.crash(StepPrepareStarted); err != nil {
		return nil, err
	}

	if err := m.applyEffects(ctx, entry, devs); err != nil {
		if errors.Is(err, ErrInjected) {
			return nil, err
		}
		m.abandon(ctx, entry)
		return nil, fmt.Errorf("prepare claim %s: %w", ref, err)
	}
	if err := m.crash(StepSharingApplied); err != nil {
		return nil, err
	}

	ids, err := m.cfg.CDI.WriteClaimSpec(ref, cdiDevices(devs))
	if err != nil {
		m.abandon(ctx, entry)
		return nil, fmt.Errorf("prepare claim %s: %w", ref, withKind(ErrCDI, fmt.Errorf("write CDI spec: %w", err)))
	}
	if err := m.crash(StepSpecWritten); err != nil {
		return nil, err
	}

	prev = m.cp.Clone()
	entry.State = checkpoint.PrepareCompleted
	entry.Updated = time.Now()
	for i := range entry.Devices {
		entry.Devices[i].CDIDeviceIDs = ids[i]
	}
	if err := m.save(prev); err != nil {
		m.abandon(ctx, entry)
		return nil, fmt.Errorf("prepare claim %s: %w", ref, err)
	}
	if err := m.crash(StepPrepareCompleted); err != nil {
		return nil, err
	}
	logShares(logger, devs)
	logger.V(2).Info("Prepared claim", "devices", len(devs))
	return devicesOf(entry), nil
}

// abandon undoes a prepare that failed after PrepareStarted was saved.
// Failures here are logged: the entry stays PrepareStarted and the next
// attempt or the next start rolls it back.
func (m *Manager) abandon(ctx context.Context, entry *checkpoint.Claim) {
	if err := m.rollback(ctx, entry); err != nil {
		klog.FromContext(ctx).Error(err, "Roll back failed prepare", "claim", entry.Namespace+"/"+entry.Name)
	}
}

// Unprepare undoes Prepare. A claim that is not prepared is not an error.
func (m *Manager) Unprepare(ctx context.Context, uid, namespace, name string) error {
	defer m.claimLocks.Lock(uid)()
	m.mu.Lock()
	ref := cdi.ClaimRef{UID: uid, Namespace: namespace, Name: name}
	c, ok := m.cp.Claims[uid]
	if !ok {
		m.mu.Unlock()
		// Nothing recorded; a spec left by a lost checkpoint still goes.
		if err := m.cfg.CDI.RemoveClaimSpec(uid); err != nil {
			return fmt.Errorf("unprepare claim %s: %w", ref, withKind(ErrCDI, err))
		}
		return nil
	}
	if !holdsEffects(c) {
		m.mu.Unlock()
		return m.unpreparePlain(ctx, ref, c)
	}
	defer m.mu.Unlock()
	prev := m.cp.Clone()
	c.State = checkpoint.UnprepareStarted
	c.Updated = time.Now()
	if err := m.save(prev); err != nil {
		return fmt.Errorf("unprepare claim %s: %w", ref, err)
	}
	if err := m.crash(StepUnprepareStarted); err != nil {
		return err
	}
	if err := m.rollback(ctx, c); err != nil {
		return fmt.Errorf("unprepare claim %s: %w", ref, err)
	}
	klog.FromContext(ctx).V(2).Info("Unprepared claim", "claim", klog.KRef(namespace, name), "uid", uid)
	return nil
}

// rollback removes everything a claim holds and then its entry. Every step
// is idempotent, so it can run again after a crash at any point.
func (m *Manager) rollback(ctx context.Context, c *checkpoint.Claim) error {
	specErr := m.cfg.CDI.RemoveClaimSpec(c.UID)
	if specErr == nil {
		if err := m.crash(StepSpecRemoved); err != nil {
			return err
		}
	}
	// The effects go even when the spec could not: the entry stays and the
	// next attempt removes the spec, but hardware is not held meanwhile.
	if err := m.undoEffects(ctx, c); err != nil {
		return err
	}
	if specErr != nil {
		return withKind(ErrCDI, specErr)
	}
	prev := m.cp.Clone()
	delete(m.cp.Claims, c.UID)
	if err := m.save(prev); err != nil {
		return err
	}
	return m.crash(StepUnprepareFinished)
}

// ensureSpec makes sure a prepared claim's effects are in place (its MPS
// daemon adopted, or started again if it died) and rewrites the claim's
// spec if it is gone (a reboot clears /var/run/cdi while the checkpoint on
// disk survives).
func (m *Manager) ensureSpec(ctx context.Context, ref cdi.ClaimRef, c *checkpoint.Claim) error {
	r := &recorded{c: c}
	n, err := m.ensureClaim(ctx, r, onPrepare)
	if err != nil {
		return err
	}
	if n > 0 && m.cfg.MPSRestarted != nil {
		m.cfg.MPSRestarted(n)
	}
	if specExists(m.cfg.CDI.SpecPath(ref.UID)) {
		return nil
	}
	devs, err := r.devices(m)
	if err != nil {
		return err
	}
	ids, err := m.cfg.CDI.WriteClaimSpec(ref, devs)
	if err != nil {
		return withKind(ErrCDI, fmt.Errorf("rewrite CDI spec: %w", err))
	}
	prev := m.cp.Clone()
	for i := range c.Devices {
		c.Devices[i].CDIDeviceIDs = ids[i]
	}
	return m.save(prev)
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
