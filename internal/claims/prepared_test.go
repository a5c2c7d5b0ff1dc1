package claims

import "github.com/tessera-gpu/tessera/internal/checkpoint"

// Prepared returns a copy of every claim the manager holds, by UID: what
// the tests look at. The product reads Counts and Holds instead.
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
