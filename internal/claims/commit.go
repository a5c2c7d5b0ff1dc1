package claims

import (
	"fmt"
	"maps"
	"slices"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
)

// The checkpoint file trails the one in memory by at most the changes
// whose callers are waiting for them to be written: every change is made
// under m.mu, published as a new version, and the caller waits in persist
// until that version, or a later one, is in the file (written, not
// fsynced: what survives an agent crash, see checkpoint.Store.Save) before
// it acts on it (returns to the kubelet, carves, starts a daemon).
//
// A version is what changed since the last one, not the whole state: every
// change marks the claims it changes (touch, keep), and publishing copies
// those claims only (and the node-wide fields, which are small) into the
// batch of changes not yet written. The store writes a batch as one record
// of its log (checkpoint.Store.SaveChanges), so a prepare costs the same
// with one claim held or five hundred. Only recovery, which replaces the
// whole state, publishes it whole (publishAll).
//
// Writes go one at a time and always write every change published so far,
// so callers that arrive while a write is under way are served together by
// the next one (group commit): eight prepares in flight cost about two
// writes, not eight. A newer version is never overwritten by an older one.

// batch is what was published and not yet written: the changes of every
// version up to version.
type batch struct {
	version uint64
	// full, if not nil, is the whole state as of a publishAll; claims go
	// on top of it.
	full *checkpoint.Checkpoint
	// claims are copies of the claims changed, by UID; nil: deleted.
	claims          map[string]*checkpoint.Claim
	bootID          string
	partitionModeOn []string
	// whole is the whole state as of version, kept only when verifyWrite
	// is set (tests).
	whole *checkpoint.Checkpoint
}

// verifyWrite, set by this package's tests, is called after every
// successful write with the store and the whole state the write was to
// leave on disk.
var verifyWrite func(s *checkpoint.Store, whole *checkpoint.Checkpoint)

// touch marks the claim uid changed (or deleted) in m.cp, for the next
// publish. m.mu is held.
func (m *Manager) touch(uid string) {
	if m.dirty == nil {
		m.dirty = map[string]struct{}{}
	}
	m.dirty[uid] = struct{}{}
}

// publishLocked makes the current state the newest version to write and
// returns it: the claims touched since the last publish join the batch to
// write. m.mu is held.
func (m *Manager) publishLocked() uint64 {
	m.version++
	m.pendMu.Lock()
	defer m.pendMu.Unlock()
	b := m.pending
	if b == nil {
		b = &batch{claims: make(map[string]*checkpoint.Claim, len(m.dirty))}
		m.pending = b
	}
	if m.all {
		b.full = m.cp.Clone()
		clear(b.claims)
		m.all = false
	} else {
		for uid := range m.dirty {
			b.claims[uid] = m.cp.Claims[uid].Clone() // nil when deleted
		}
	}
	clear(m.dirty)
	b.version = m.version
	b.bootID, b.partitionModeOn = m.cp.BootID, slices.Clone(m.cp.PartitionModeOn)
	if verifyWrite != nil {
		b.whole = m.cp.Clone()
	}
	return m.version
}

// publishAll is publishLocked of the whole state (recovery, which
// replaced it). m.mu is held.
func (m *Manager) publishAll() uint64 {
	m.all = true
	return m.publishLocked()
}

// persist returns once version v, or a later one, is on disk. It does not
// take m.mu, so it may be called with or without it.
func (m *Manager) persist(v uint64) error {
	m.saveMu.Lock()
	defer m.saveMu.Unlock()
	if m.written >= v {
		return nil
	}
	m.pendMu.Lock()
	b := m.pending
	m.pending = nil
	m.pendMu.Unlock()
	if b == nil {
		// Not reached: every version above written is in pending.
		return withKind(ErrCheckpoint, fmt.Errorf("save checkpoint: version %d published but not pending", v))
	}
	err := m.cfg.Store.SaveChanges(&checkpoint.Changes{Full: b.full, Claims: b.claims, BootID: b.bootID, PartitionModeOn: b.partitionModeOn})
	if err != nil {
		m.requeue(b)
		return withKind(ErrCheckpoint, fmt.Errorf("save checkpoint: %w", err))
	}
	m.written = b.version
	if verifyWrite != nil {
		verifyWrite(m.cfg.Store, b.whole)
	}
	return nil
}

// requeue puts back a batch that could not be written, under what was
// published since: the next write writes both.
func (m *Manager) requeue(b *batch) {
	m.pendMu.Lock()
	defer m.pendMu.Unlock()
	newer := m.pending
	switch {
	case newer == nil:
		m.pending = b
	case newer.full != nil:
		// The whole state as of later: b is in it.
	default:
		maps.Copy(b.claims, newer.claims)
		b.version, b.bootID, b.partitionModeOn, b.whole = newer.version, newer.bootID, newer.partitionModeOn, newer.whole
		m.pending = b
	}
}

// undo is what restores the state when a save under m.mu fails: the claim
// the change is about as it was (nil: absent), and the node-wide fields.
type undo struct {
	uid             string
	claim           *checkpoint.Claim
	partitionModeOn []string
}

// keep returns the undo of a change to the claim uid ("" for the
// node-wide fields alone), which it marks changed: the change follows, then
// save. m.mu is held.
func (m *Manager) keep(uid string) undo {
	u := undo{uid: uid, partitionModeOn: slices.Clone(m.cp.PartitionModeOn)}
	if uid != "" {
		u.claim = m.cp.Claims[uid].Clone()
		m.touch(uid)
	}
	return u
}

// save publishes and persists the state, m.mu held (operations with side
// effects, recovery); on failure the state is restored from prev, so it
// never runs ahead of disk.
func (m *Manager) save(prev undo) error {
	if err := m.persist(m.publishLocked()); err != nil {
		if prev.uid != "" {
			if prev.claim != nil {
				m.cp.Claims[prev.uid] = prev.claim
			} else {
				delete(m.cp.Claims, prev.uid)
			}
			m.touch(prev.uid)
		}
		m.cp.PartitionModeOn = prev.partitionModeOn
		m.publishLocked()
		return err
	}
	return nil
}

// change applies fn, which changes the claim uid only, to the state and
// saves it. held: m.mu is held (an operation with side effects, recovery),
// and a failed save restores the state from before fn. Otherwise m.mu is
// taken only to apply fn and publish (a plain claim), and the caller undoes
// fn if the save fails.
func (m *Manager) change(held bool, uid string, fn func()) error {
	if held {
		prev := m.keep(uid)
		fn()
		return m.save(prev)
	}
	m.mu.Lock()
	fn()
	m.touch(uid)
	v := m.publishLocked()
	m.mu.Unlock()
	return m.persist(v)
}
