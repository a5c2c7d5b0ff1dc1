package claims

import (
	"context"
	"errors"
	"fmt"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/cdi"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
)

// Prepare prepares one claim and returns its devices. It is idempotent: a
// claim already prepared returns what was prepared before.
func (m *Manager) Prepare(ctx context.Context, claim *resourceapi.ResourceClaim) ([]Device, error) {
	defer m.claimLocks.Lock(string(claim.UID))()
	if chs, others := m.channelResults(claim); len(chs) > 0 {
		return m.prepareChannels(ctx, cdi.ClaimRef{UID: string(claim.UID), Namespace: claim.Namespace, Name: claim.Name}, chs, others)
	}
	devs, suspects, err := m.prepare(ctx, claim, m.cfg.GetClaim != nil)
	if len(suspects) == 0 {
		return devs, err
	}
	ref := cdi.ClaimRef{UID: string(claim.UID), Namespace: claim.Namespace, Name: claim.Name}
	again, relErr := m.releaseStale(ctx, ref, suspects)
	switch {
	case relErr != nil:
		return nil, fmt.Errorf("prepare claim %s: %w", ref, relErr)
	case !again:
		return nil, err
	}
	// m.mu was let go while the API server was asked: everything is
	// looked at again, once.
	devs, _, err = m.prepare(ctx, claim, false)
	return devs, err
}

// prepare is one attempt at Prepare, the claim's lock held. look: a
// refusal for devices other prepared claims hold returns those claims, to
// ask the API server about (stale.go).
func (m *Manager) prepare(ctx context.Context, claim *resourceapi.ResourceClaim, look bool) ([]Device, []suspect, error) {
	m.mu.Lock()
	locked := true
	defer func() {
		if locked {
			m.mu.Unlock()
		}
	}()
	ref := cdi.ClaimRef{UID: string(claim.UID), Namespace: claim.Namespace, Name: claim.Name}
	logger := klog.FromContext(ctx).WithValues("claim", klog.KObj(claim), "uid", claim.UID)

	if c, ok := m.cp.Claims[ref.UID]; ok && c.State == checkpoint.PrepareCompleted && !lostPartitions(c) && !lostVFIO(c) {
		if err := m.confirm(ctx, ref, c); err != nil {
			return nil, nil, fmt.Errorf("prepare claim %s: %w", ref, err)
		}
		logger.V(4).Info("Claim already prepared")
		out := devicesOf(c)
		if m.cfg.DeviceMetadata {
			m.recordedMetadata(c, out)
		}
		return out, nil, nil
	}
	if c, ok := m.cp.Claims[ref.UID]; ok {
		// A half-done prepare or unprepare of this claim from a failed call,
		// or partitions or a passthrough a reboot took: undo it, then
		// prepare from scratch.
		if err := m.rollback(ctx, c); err != nil {
			return nil, nil, fmt.Errorf("prepare claim %s: clean up earlier attempt: %w", ref, err)
		}
	}
	devs, suspects, err := m.admit(ctx, ref, claim, look)
	if err != nil {
		return nil, suspects, fmt.Errorf("prepare claim %s: %w", ref, err)
	}

	entry := &checkpoint.Claim{UID: ref.UID, Namespace: ref.Namespace, Name: ref.Name, State: checkpoint.PrepareStarted, Updated: time.Now()}
	held := m.plan(entry, devs)
	if !held {
		// A plain claim: recorded in memory only, which reserves its devices
		// against other claims; a crash before the spec and the entry are
		// saved leaves nothing behind, or a spec the start-up sweep removes.
		// It needs m.mu only to record.
		m.cp.Claims[ref.UID] = entry
		m.touch(ref.UID)
		m.mu.Unlock()
		locked = false
		if err := m.crash(stepPrepareStarted); err != nil {
			return nil, nil, err
		}
	} else if err := m.startEffects(ctx, ref, entry, devs); err != nil {
		return nil, nil, err
	}
	out, err := m.complete(ctx, logger, ref, entry, devs, held)
	return out, nil, err
}

// confirm is Prepare of a claim prepared already: its effects are put
// back in place where they went (ensureSpec) and a claim recorded before a
// reboot is confirmed (checkpoint.Claim's Unconfirmed).
func (m *Manager) confirm(ctx context.Context, ref cdi.ClaimRef, c *checkpoint.Claim) error {
	if err := m.ensureSpec(ctx, ref, c); err != nil {
		return err
	}
	if !c.Unconfirmed {
		return nil
	}
	prev := m.keep(c.UID)
	c.Unconfirmed = false
	return m.save(prev)
}

// admit resolves the claim's devices and refuses them where they conflict
// with other prepared claims; look: a refusal for devices prepared claims
// hold returns those claims too (suspects). m.mu is held.
func (m *Manager) admit(ctx context.Context, ref cdi.ClaimRef, claim *resourceapi.ResourceClaim, look bool) ([]planned, []suspect, error) {
	all, err := m.resolve(claim)
	if err != nil {
		return nil, nil, err
	}
	// Only the devices the claim holds are checked against other claims:
	// an admin-access device is watched, whoever holds it (admin.go).
	devs := holdingOnly(all)
	if err := m.yieldUnconfirmed(ctx, ref, devs); err != nil {
		return nil, nil, err
	}
	// What these refuse is written into the claim's status and its pod's
	// events: they say what blocked, and only the agent's log says whose
	// claim it is (another namespace's claims are not the refused claim's
	// owner's to read).
	if err := m.checkConflicts(ctx, ref, devs); err != nil {
		if look {
			return nil, m.suspects(ref, devs), err
		}
		return nil, nil, err
	}
	if err := m.checkEffects(ctx, ref.UID, devs); err != nil {
		return nil, nil, err
	}
	if err := m.checkShares(ctx, ref.UID, devs); err != nil {
		if look {
			return nil, m.shareSuspects(ref, devs), err
		}
		return nil, nil, err
	}
	return all, nil, nil
}

// startEffects saves entry PrepareStarted, then applies the claim's side
// effects. m.mu is held.
func (m *Manager) startEffects(ctx context.Context, ref cdi.ClaimRef, entry *checkpoint.Claim, devs []planned) error {
	prev := m.keep(ref.UID)
	m.cp.Claims[ref.UID] = entry
	if err := m.save(prev); err != nil {
		return fmt.Errorf("prepare claim %s: %w", ref, err)
	}
	if err := m.crash(stepPrepareStarted); err != nil {
		return err
	}
	if err := m.applyEffects(ctx, entry, devs); err != nil {
		if errors.Is(err, errInjected) {
			return err
		}
		m.abandon(ctx, entry)
		return fmt.Errorf("prepare claim %s: %w", ref, err)
	}
	return m.crash(stepSharingApplied)
}

// complete writes the claim's CDI spec and saves its entry
// PrepareCompleted: the end of every prepare. held: m.mu is held
// throughout (a claim with side effects) and a failure rolls the claim
// back; otherwise m.mu is taken only to record, and a failure drops the
// entry.
func (m *Manager) complete(ctx context.Context, logger klog.Logger, ref cdi.ClaimRef, entry *checkpoint.Claim, devs []planned, held bool) ([]Device, error) {
	fail := func(err error) ([]Device, error) {
		if held {
			m.abandon(ctx, entry)
		} else {
			m.dropPlain(ctx, entry)
		}
		return nil, fmt.Errorf("prepare claim %s: %w", ref, err)
	}
	ids, iso, err := m.writeSpec(ref, cdiDevices(devs))
	if err != nil {
		return fail(withKind(ErrCDI, fmt.Errorf("write CDI spec: %w", err)))
	}
	if err := m.crash(stepSpecWritten); err != nil {
		return nil, err
	}
	var out []Device
	err = m.change(held, entry.UID, func() {
		entry.State = checkpoint.PrepareCompleted
		entry.Updated = time.Now()
		for i := range entry.Devices {
			entry.Devices[i].CDIDeviceIDs = ids[i]
		}
		out = devicesOf(entry)
	})
	for i := range out {
		if out[i].Share != nil {
			out[i].Isolation = &iso[i]
		}
	}
	if err != nil {
		return fail(err)
	}
	if m.cfg.DeviceMetadata {
		for i := range out {
			out[i].Metadata = metadataOf(devs[i].attrs, &devs[i].dev, out[i].Isolation)
		}
	}
	if err := m.crash(stepPrepareCompleted); err != nil {
		return nil, err
	}
	logShares(logger, devs)
	logger.V(2).Info("Prepared claim", "devices", len(devs))
	return out, nil
}

// abandon undoes a prepare that failed after PrepareStarted was saved.
// Failures here are logged: the entry stays PrepareStarted and the next
// attempt or the next start rolls it back.
func (m *Manager) abandon(ctx context.Context, entry *checkpoint.Claim) {
	if err := m.rollback(ctx, entry); err != nil {
		klog.FromContext(ctx).Error(err, "Roll back failed prepare", "claim", entry.Namespace+"/"+entry.Name)
	}
}

// dropPlain undoes a plain prepare that failed: its spec and its entry go.
// A failure to save that is logged: whatever is on disk is a claim with
// nothing on the node, which the next attempt or start rolls back.
func (m *Manager) dropPlain(ctx context.Context, entry *checkpoint.Claim) {
	if err := m.cfg.CDI.RemoveClaimSpec(entry.UID); err != nil {
		klog.FromContext(ctx).Error(err, "Remove CDI spec of failed prepare", "claim", klog.KRef(entry.Namespace, entry.Name))
	}
	m.mu.Lock()
	if m.cp.Claims[entry.UID] == entry {
		delete(m.cp.Claims, entry.UID)
		m.touch(entry.UID)
	}
	v := m.publishLocked()
	m.mu.Unlock()
	if err := m.persist(v); err != nil {
		klog.FromContext(ctx).Error(err, "Save checkpoint after failed prepare", "claim", klog.KRef(entry.Namespace, entry.Name))
	}
}

// ensureSpec makes sure a prepared claim's effects are in place (its MPS
// daemon adopted, or started again if it died) and rewrites the claim's
// spec if it is gone (a reboot clears /var/run/cdi while the checkpoint on
// disk survives), with its NCCL topology file if it has one; the file
// gone alone (removed by hand) is written again too.
func (m *Manager) ensureSpec(ctx context.Context, ref cdi.ClaimRef, c *checkpoint.Claim) error {
	r := &recorded{c: c}
	n, err := m.ensureClaim(ctx, r, onPrepare)
	if err != nil {
		return err
	}
	if n > 0 && m.cfg.MPSRestarted != nil {
		m.cfg.MPSRestarted(n)
	}
	if specExists(m.cfg.CDI.SpecPath(ref.UID)) && (!wantsTopology(c) || m.cfg.CDI.TopologyExists(ref.UID)) {
		return nil
	}
	devs, err := r.devices(m)
	if err != nil {
		return err
	}
	ids, _, err := m.writeSpec(ref, devs)
	if err != nil {
		return withKind(ErrCDI, fmt.Errorf("rewrite CDI spec: %w", err))
	}
	prev := m.keep(c.UID)
	for i := range c.Devices {
		c.Devices[i].CDIDeviceIDs = ids[i]
	}
	return m.save(prev)
}
