package claims

import (
	"fmt"

	"github.com/tessera-gpu/tessera/pkg/checkpoint"
)

// The checkpoint file trails the one in memory by at most the changes
// whose callers are waiting for them to be written: every change is made
// under m.mu, published as a new version (a snapshot), and the caller waits
// in persist until that version, or a later one, is in the file (written,
// not fsynced: what survives an agent crash, see checkpoint.Store.Save)
// before it acts on it (returns to the kubelet, carves, starts a daemon).
//
// Writes go one at a time and always write the newest snapshot, so callers
// that arrive while a write is under way are served together by the next
// one (group commit): eight prepares in flight cost about two writes, not
// eight. A newer version is never overwritten by an older one.

// snapshot is the checkpoint as of one version.
type snapshot struct {
	version uint64
	cp      *checkpoint.Checkpoint
}

// publishLocked makes the current state the newest version to write and
// returns it. m.mu is held.
func (m *Manager) publishLocked() uint64 {
	m.version++
	m.snap.Store(&snapshot{version: m.version, cp: m.cp.Clone()})
	return m.version
}

// persist returns once version v, or a later one, is on disk. It does not
// take m.mu, so it may be called with or without it.
func (m *Manager) persist(v uint64) error {
	m.saveMu.Lock()
	defer m.saveMu.Unlock()
	if m.written >= v {
		return nil
	}
	s := m.snap.Load()
	if err := m.cfg.Store.Save(s.cp); err != nil {
		return withKind(ErrCheckpoint, fmt.Errorf("save checkpoint: %w", err))
	}
	m.written = s.version
	return nil
}

// save publishes and persists the state, m.mu held (operations with side
// effects, recovery); on failure the state is restored from prev, so it
// never runs ahead of disk.
func (m *Manager) save(prev *checkpoint.Checkpoint) error {
	if err := m.persist(m.publishLocked()); err != nil {
		m.cp = prev
		m.publishLocked()
		return err
	}
	return nil
}

// change applies fn to the state and saves it. held: m.mu is held (an
// operation with side effects, recovery), and a failed save restores the
// state from before fn. Otherwise m.mu is taken only to apply fn and
// publish (a plain claim), and the caller undoes fn if the save fails.
func (m *Manager) change(held bool, fn func()) error {
	if held {
		prev := m.cp.Clone()
		fn()
		return m.save(prev)
	}
	m.mu.Lock()
	fn()
	v := m.publishLocked()
	m.mu.Unlock()
	return m.persist(v)
}
