package claims

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/cdi"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
)

// Unprepare undoes Prepare. A claim that is not prepared is not an error.
func (m *Manager) Unprepare(ctx context.Context, uid, namespace, name string) error {
	defer m.claimLocks.Lock(uid)()
	m.mu.Lock()
	ref := cdi.ClaimRef{UID: uid, Namespace: namespace, Name: name}
	c, ok := m.cp.Claims[uid]
	if !ok {
		m.mu.Unlock()
		// Nothing recorded; a spec left by a lost checkpoint still goes,
		// and an idle daemon a failed stop left.
		if err := m.cfg.CDI.RemoveClaimSpec(uid); err != nil {
			return fmt.Errorf("unprepare claim %s: %w", ref, withKind(ErrCDI, err))
		}
		if err := m.StopIdleIMEX(ctx); err != nil {
			return fmt.Errorf("unprepare claim %s: %w", ref, err)
		}
		return nil
	}
	// A claim holding side effects saves its intent first and holds m.mu
	// throughout. A plain claim saves none: a crash before its entry goes
	// leaves a prepared entry without its spec, which the kubelet's
	// retried unprepare removes (and a prepare would rewrite).
	var err error
	if holdsEffects(c) {
		err = m.retire(ctx, c)
		m.mu.Unlock()
	} else {
		m.mu.Unlock()
		if err = m.crash(stepUnprepareStarted); err == nil {
			err = m.teardown(ctx, c, false)
		}
	}
	if err != nil {
		return fmt.Errorf("unprepare claim %s: %w", ref, err)
	}
	klog.FromContext(ctx).V(2).Info("Unprepared claim", "claim", klog.KRef(namespace, name), "uid", uid)
	if holdsChannel(c) {
		// The last channel's claim gone: the daemon goes too. A failure
		// fails the unprepare, which the kubelet retries; the claim's
		// entry is gone by then, so the retry only stops the daemon.
		if err := m.StopIdleIMEX(ctx); err != nil {
			return fmt.Errorf("unprepare claim %s: %w", ref, err)
		}
	}
	return nil
}

// rollback removes everything a claim holds and then its entry. Every step
// is idempotent, so it can run again after a crash at any point. m.mu is
// held.
func (m *Manager) rollback(ctx context.Context, c *checkpoint.Claim) error {
	return m.teardown(ctx, c, true)
}

// teardown removes c's spec, undoes its side effects and deletes its
// entry. held: m.mu is held throughout; otherwise c is a plain claim,
// with no effects to undo, and m.mu is taken only to delete.
func (m *Manager) teardown(ctx context.Context, c *checkpoint.Claim, held bool) error {
	specErr := m.cfg.CDI.RemoveClaimSpec(c.UID)
	if specErr == nil {
		if err := m.crash(stepSpecRemoved); err != nil {
			return err
		}
	}
	// The effects go even when the spec could not: the entry stays and the
	// next attempt removes the spec, but hardware is not held meanwhile.
	if err := m.undoEffects(ctx, c, held); err != nil {
		return err
	}
	if specErr != nil {
		return withKind(ErrCDI, specErr)
	}
	if err := m.forget(c, held); err != nil {
		return err
	}
	return m.crash(stepUnprepareFinished)
}

// forget deletes c's entry and saves. When the save fails memory must not
// run ahead of disk: the entry is back, and the kubelet's retry removes it.
func (m *Manager) forget(c *checkpoint.Claim, held bool) error {
	err := m.change(held, c.UID, func() { delete(m.cp.Claims, c.UID) })
	if err != nil && !held {
		m.mu.Lock()
		if _, taken := m.cp.Claims[c.UID]; !taken {
			m.cp.Claims[c.UID] = c
			m.touch(c.UID)
		}
		m.publishLocked()
		m.mu.Unlock()
	}
	return err
}
