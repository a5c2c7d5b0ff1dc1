package claims

import (
	"context"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
)

// partitions is the dynamic partitioning effect (publish.Dynamic): a
// device allocated a MIG placement gets its partition carved at prepare
// and destroyed at unprepare, and a whole GPU of a dynamic node has its
// MIG mode off. The mode is part of this effect, not one of its own: it
// is switched on just before the first carve on its GPU (carve.go) and
// back off once the GPU's last partition is destroyed (release.go), so
// its every step is ordered against the carves and destroys, and both are
// recorded in the same writes. At start and on the driver's retry, the
// partitions no claim holds go (sweep.go).
type partitions struct{ nothing }

// plan records a placement's profile and placement before the carve, so
// a crash between carve and save still finds what to destroy.
func (partitions) plan(m *Manager, d *planned, rec *checkpoint.Device) bool {
	if d.carve != nil {
		pl := d.carve.Placement
		rec.Profile, rec.Placement = d.carve.Profile, &pl
		return true
	}
	// A whole GPU of a dynamic node: its MIG mode may have to go off.
	return d.dev.Partition == nil && m.dynamic(&d.dev.GPU)
}

func (partitions) holds(d checkpoint.Device) bool {
	return d.Placement != nil || d.CreatedPartition
}

func (partitions) apply(ctx context.Context, m *Manager, entry *checkpoint.Claim, devs []planned) error {
	return m.carveAll(ctx, entry, devs)
}

func (partitions) undo(ctx context.Context, m *Manager, c *checkpoint.Claim) error {
	return m.releasePartitions(ctx, c)
}

func (partitions) sweep(ctx context.Context, m *Manager, _ occasion) (int, error) {
	return m.sweepOrphans(ctx)
}

// lostPartitions reports whether a prepared claim's carved partitions are
// gone: recovery clears CreatedPartition when the node rebooted. Such a
// claim is prepared again from scratch.
func lostPartitions(c *checkpoint.Claim) bool {
	for _, d := range c.Devices {
		if d.Placement != nil && !d.CreatedPartition {
			return true
		}
	}
	return false
}
