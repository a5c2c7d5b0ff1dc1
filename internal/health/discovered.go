package health

import (
	"time"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// KeyDiscovery is the condition of what discovery found wrong with a GPU
// (inventory.GPU.Health): "lost" (NoExecute) when the GPU answered that it
// has fallen off the bus but could still be named, "degraded" (NoSchedule)
// when a value could not be read. It is discovery's own key, beside the
// health watch's KeyLost, because it clears differently: when a discovery
// reads the GPU cleanly, whatever the watch saw.
const KeyDiscovery = "gpu.tessera.dev/discovery"

// Discovered applies discovery's verdict on the GPU with UUID gpu and
// reports whether its conditions changed. A degraded GPU may still run
// what runs on it (a value unread is not a failing GPU), so NoSchedule;
// a lost one cannot, so NoExecute and its pods are evicted.
func (t *Tracker) Discovered(gpu string, h inventory.Health) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.state(gpu)
	before := s.fingerprint()
	now := time.Now()
	switch {
	case h.Lost:
		s.raise(KeyDiscovery, "lost", NoExecute, false, now, h.Reason)
	case h.State == inventory.Unhealthy:
		s.raise(KeyDiscovery, "degraded", NoSchedule, false, now, h.Reason)
	default:
		delete(s.conds, KeyDiscovery)
	}
	return s.fingerprint() != before
}
