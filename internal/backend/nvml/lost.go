//go:build cgo && linux

package nvml

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// Lost GPUs at discovery. A GPU that answers ERROR_GPU_IS_LOST is
// published tainted NoExecute wherever it can still be named: its UUID and
// PCI bus ID answered, or this backend read them at an earlier discovery
// of the same NVML index. Pods may run on it (rediscovery follows every
// MIG or generation change), and a device that vanished from the slices
// would take the health watch's NoExecute taint with it, leave those pods
// running on a dead GPU, and renumber every later gpu-<n>. A GPU lost
// before it was ever named cannot be published (no UUID for its device,
// no bus ID for its place in the gpu-<n> order; no pod can be using it):
// it is left out, said once and counted (inventory.Node.Unpublished).

// identity is what names a GPU.
type identity struct{ uuid, bdf string }

// remember keeps index i's identity for a later discovery. Callers hold b.mu.
func (b *Backend) remember(i int, id identity) {
	if b.ids == nil {
		b.ids = map[int]identity{}
	}
	b.ids[i] = id
}

// remembered is index i's identity from an earlier discovery.
func (b *Backend) remembered(i int) (identity, bool) {
	id, ok := b.ids[i]
	return id, ok
}

// unnamedError: the GPU at index answered ERROR_GPU_IS_LOST before this
// backend ever read its UUID and bus ID.
type unnamedError struct {
	index int
	err   error
}

func (e *unnamedError) Error() string {
	return fmt.Sprintf("GPU at NVML index %d is lost and was never named: %v", e.index, e.err)
}

func (e *unnamedError) Unwrap() error { return e.err }

// unpublished is the record of a GPU that Discover leaves out.
func unpublished(i int, err error) inventory.Unpublished {
	u := inventory.Unpublished{GPU: fmt.Sprintf("nvml index %d", i), Reason: inventory.UnpublishedUnreadable, Message: err.Error()}
	var ue *unnamedError
	if errors.As(err, &ue) || lostErr(err) {
		u.Reason = inventory.UnpublishedLost
	}
	return u
}

// lostErr reports whether err is (or wraps) an NVML ERROR_GPU_IS_LOST.
func lostErr(err error) bool { return is(err, nvml.ERROR_GPU_IS_LOST) }

// leaveOut records a GPU Discover does not publish and says so once per
// GPU and reason: Discover runs again on every generation change, and the
// same line each time would bury the first. logr has no warning level;
// this is the always-on level (V(0)), and the metric carries the count.
func (b *Backend) leaveOut(node *inventory.Node, u inventory.Unpublished) {
	node.Unpublished = append(node.Unpublished, u)
	key := u.GPU + "|" + string(u.Reason)
	if b.said[key] == u.Message {
		return
	}
	b.said[key] = u.Message
	b.logger.Info("GPU not published", "gpu", u.GPU, "reason", u.Reason, "detail", u.Message)
}

// sayHealth logs a GPU's health verdict when it changed since the last
// discovery: a lost GPU and a degraded one once each, not at every Discover.
func (b *Backend) sayHealth(g *inventory.GPU) {
	key := g.UUID + "|health"
	if b.said[key] == g.Health.Reason {
		return
	}
	b.said[key] = g.Health.Reason
	switch {
	case g.Health.Lost:
		b.logger.Info("GPU lost; published with a NoExecute taint", "uuid", g.UUID, "pciBusID", g.PCIBusID, "reason", g.Health.Reason)
	case g.Health.State == inventory.Unhealthy:
		b.logger.Error(nil, "GPU degraded; published with a NoSchedule taint", "uuid", g.UUID, "pciBusID", g.PCIBusID, "reason", g.Health.Reason)
	}
}
