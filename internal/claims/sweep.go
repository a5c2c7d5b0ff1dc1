package claims

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// sweepOrphans destroys, on GPUs partitioned dynamically, every partition
// that no claim records: left by a crash the checkpoint cannot explain, cut
// by hand, or surviving a lost checkpoint. Dynamic partitioning owns those
// GPUs' layout; a partition nobody owns would block placements the
// scheduler believes free. A partition that will not go (in use outside
// Kubernetes) is logged and left: the agent must still start. The driver
// then withholds its slices from the scheduler (Holds) and retries the
// sweep (SweepOrphans) until it goes.
func (m *Manager) sweepOrphans(ctx context.Context) (int, error) {
	if m.cfg.Partitioning != publish.Dynamic {
		return 0, nil
	}
	logger := klog.FromContext(ctx)
	inv, err := m.cfg.Backend.Discover(ctx)
	if err != nil {
		return 0, fmt.Errorf("discover partitions: %w", err)
	}
	owned := m.ownedPartitions("")
	total := 0
	destroyed := func(n int) {
		total += n
		for range n {
			if m.cfg.OrphanDestroyed != nil {
				m.cfg.OrphanDestroyed()
			}
		}
	}
	for i := range inv.GPUs {
		g := &inv.GPUs[i]
		if !m.dynamic(g) {
			continue
		}
		if sc, ok := m.cfg.Backend.(backend.StrayCleaner); ok {
			n, err := sc.DestroyStray(ctx, g.UUID)
			destroyed(n)
			if n > 0 {
				logger.Info("Destroyed half-made partitions", "gpu", g.UUID, "count", n)
			}
			if err != nil {
				logger.Error(err, "Half-made partitions left in place", "gpu", g.UUID)
			}
		}
		if m.modal(g) {
			continue // its partitions go with its mode: restModes below
		}
		for _, p := range g.Partitions {
			if owned[p.UUID] {
				continue
			}
			logger.Info("Destroying partition that no prepared claim owns", "gpu", g.UUID, "profile", p.Profile, "placement", p.Placement.Start, "uuid", p.UUID)
			if err := m.destroyPartition(ctx, g.UUID, p.UUID); err != nil {
				logger.Error(err, "Partition that no prepared claim owns left in place", "gpu", g.UUID, "uuid", p.UUID)
				continue
			}
			destroyed(1)
		}
	}
	if err := m.restModes(ctx, inv, nil, ""); err != nil {
		logger.Error(err, "Partition mode of a GPU no claim holds left as it is")
	}
	if err := m.restoreModes(ctx, nil); err != nil {
		logger.Error(err, "Partition mode left as it is")
	}
	return total, nil
}

// SweepOrphans runs the start-up sweep again while the agent runs, between
// claim operations, and returns how many partitions it destroyed. The
// driver calls it while partitions nobody holds are withheld: one that
// would not go at start (in use outside Kubernetes) may go once its user
// exits, and its slices return to the scheduler.
func (m *Manager) SweepOrphans(ctx context.Context) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sweepEffects(ctx, onSweep)
}

// Holds reports whether a claim in the checkpoint holds partition p of GPU
// gpu: records its UUID, or is carving it (its device names p's profile and
// placement and has no partition yet). The driver publishes with it so a
// partition nobody holds is withheld from the scheduler (publish.Options.Held).
func (m *Manager) Holds(gpu string, p *inventory.Partition) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.cp.Claims {
		for _, d := range c.Devices {
			if !holding(d) {
				continue // a monitor keeps no partition alive
			}
			if p.UUID != "" && d.PartitionUUID == p.UUID {
				return true
			}
			if d.PartitionUUID == "" && d.Placement != nil && d.GPUUUID == gpu && d.Profile == p.Profile && *d.Placement == p.Placement {
				return true
			}
		}
	}
	return false
}
