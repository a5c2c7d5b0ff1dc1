package claims

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/pkg/cdi"
	"github.com/tessera-gpu/tessera/pkg/checkpoint"
)

// Claims with nothing to do on the node but their CDI spec (plain claims):
// prepared and unprepared without a write-ahead intent and without m.mu
// across I/O (doc.go).

// preparePlain prepares a claim whose devices need nothing done to the
// node, without m.mu across I/O: the entry (already in m.cp, in memory)
// gets its CDI spec, then is saved as PrepareCompleted. No intent is saved
// first: there is nothing to undo on the node but the spec, which a crash
// leaves to the start-up sweep of specs no claim holds.
func (m *Manager) preparePlain(ctx context.Context, logger klog.Logger, ref cdi.ClaimRef, entry *checkpoint.Claim, devs []planned) ([]Device, error) {
	if err := m.crash(StepPrepareStarted); err != nil {
		return nil, err
	}
	ids, err := m.cfg.CDI.WriteClaimSpec(ref, cdiDevices(devs))
	if err != nil {
		m.dropPlain(ctx, entry)
		return nil, fmt.Errorf("prepare claim %s: %w", ref, withKind(ErrCDI, fmt.Errorf("write CDI spec: %w", err)))
	}
	if err := m.crash(StepSpecWritten); err != nil {
		return nil, err
	}
	m.mu.Lock()
	entry.State = checkpoint.PrepareCompleted
	entry.Updated = time.Now()
	for i := range entry.Devices {
		entry.Devices[i].CDIDeviceIDs = ids[i]
	}
	v := m.publishLocked()
	out := devicesOf(entry)
	m.mu.Unlock()
	if err := m.persist(v); err != nil {
		m.dropPlain(ctx, entry)
		return nil, fmt.Errorf("prepare claim %s: %w", ref, err)
	}
	if err := m.crash(StepPrepareCompleted); err != nil {
		return nil, err
	}
	logShares(logger, devs)
	logger.V(2).Info("Prepared claim", "devices", len(devs))
	return out, nil
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
	}
	v := m.publishLocked()
	m.mu.Unlock()
	if err := m.persist(v); err != nil {
		klog.FromContext(ctx).Error(err, "Save checkpoint after failed prepare", "claim", klog.KRef(entry.Namespace, entry.Name))
	}
}

// logShares says once per prepared claim which of its capacity shares
// nothing enforces.
func logShares(logger klog.Logger, devs []planned) {
	for _, d := range devs {
		if s := d.dev.Sharing; s.IsShare() && !s.Share.Enforced {
			logger.Info("Capacity share is accounted by the scheduler only: this GPU cannot enforce it", "device", d.dev.Device, "share", s.Share.ID, "consumed", s.Share.String(), "vendor", d.dev.GPU.Vendor)
		}
	}
}

// unpreparePlain unprepares a claim that holds nothing on the node but its
// spec: the spec goes, then the entry. No intent is saved first: a crash
// between the two leaves a prepared entry without its spec, which the
// kubelet's retried unprepare removes (and a prepare would rewrite).
func (m *Manager) unpreparePlain(ctx context.Context, ref cdi.ClaimRef, c *checkpoint.Claim) error {
	if err := m.crash(StepUnprepareStarted); err != nil {
		return err
	}
	if err := m.cfg.CDI.RemoveClaimSpec(c.UID); err != nil {
		return fmt.Errorf("unprepare claim %s: %w", ref, withKind(ErrCDI, err))
	}
	if err := m.crash(StepSpecRemoved); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.cp.Claims, c.UID)
	v := m.publishLocked()
	m.mu.Unlock()
	if err := m.persist(v); err != nil {
		// Memory must not run ahead of disk: the entry is back, and the
		// kubelet's retry removes it.
		m.mu.Lock()
		if _, taken := m.cp.Claims[c.UID]; !taken {
			m.cp.Claims[c.UID] = c
		}
		m.publishLocked()
		m.mu.Unlock()
		return fmt.Errorf("unprepare claim %s: %w", ref, err)
	}
	if err := m.crash(StepUnprepareFinished); err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Unprepared claim", "claim", klog.KRef(ref.Namespace, ref.Name), "uid", ref.UID)
	return nil
}
