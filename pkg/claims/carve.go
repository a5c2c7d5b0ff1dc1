package claims

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/pkg/backend"
	"github.com/tessera-gpu/tessera/pkg/checkpoint"
	"github.com/tessera-gpu/tessera/pkg/inventory"
	tslices "github.com/tessera-gpu/tessera/pkg/slices"
)

// Dynamic partitioning (slices.Dynamic): a claim allocated a MIG placement
// gets its partition carved at prepare and destroyed at unprepare. Every
// step is recorded before it is taken, so a crash anywhere leaves a record
// of what may exist:
//
//	save PrepareStarted with each device's profile and placement
//	-> [turn MIG mode on: saved in PartitionModeOn first] -> carve
//	-> save the partition's UUID (CreatedPartition) -> CDI spec -> PrepareCompleted
//
// Rollback destroys what the record names: partitions by UUID, and for a
// device whose carve was not yet saved, a partition found at its profile and
// placement that no other claim owns. When a GPU's last partition goes and
// the agent had turned its MIG mode on, the mode goes back off.

// carveAll carves the partitions of entry's dynamic devices, filling in
// devs (the CDI view) and the entry as it goes.
func (m *Manager) carveAll(ctx context.Context, entry *checkpoint.Claim, devs []planned) error {
	logger := klog.FromContext(ctx)
	var inv *inventory.Node
	for i := range devs {
		d := &devs[i]
		if d.carve == nil && (d.dev.Partition != nil || !m.dynamic(&d.dev.GPU)) {
			continue
		}
		if inv == nil {
			var err error
			if inv, err = m.cfg.Backend.Discover(ctx); err != nil {
				return fmt.Errorf("discover partitions: %w", err)
			}
		}
		g := findGPU(inv, d.dev.GPU.UUID)
		if g == nil {
			return withKind(ErrDeviceNotOnNode, fmt.Errorf("device %s: GPU %s is gone", d.dev.Device, d.dev.GPU.UUID))
		}
		if d.carve == nil {
			// A whole GPU of a dynamic node: MIG mode must be off for it to
			// run work. The allocator guarantees no partition is on it.
			if err := m.setMode(ctx, g, false); err != nil {
				return fmt.Errorf("device %s: %w", d.dev.Device, err)
			}
			continue
		}
		if err := m.setMode(ctx, g, true); err != nil {
			return fmt.Errorf("device %s: %w", d.dev.Device, err)
		}
		p, err := m.carvePartition(ctx, g.UUID, d.carve.Profile, d.carve.Placement)
		if err != nil {
			return withKind(ErrPartition, fmt.Errorf("device %s: carve %s at %d: %w", d.dev.Device, d.carve.Profile, d.carve.Placement.Start, err))
		}
		g.Partitions = append(g.Partitions, *p)
		if err := m.crash(StepPartitionCarved); err != nil {
			return err
		}
		prev := m.cp.Clone()
		entry.Devices[i].PartitionUUID = p.UUID
		entry.Devices[i].CreatedPartition = true
		if err := m.save(prev); err != nil {
			// The record does not name the UUID; rollback finds the
			// partition by its placement.
			return err
		}
		d.dev.Partition = p
		logger.V(2).Info("Carved partition", "device", d.dev.Device, "gpu", g.UUID, "profile", p.Profile, "placement", p.Placement.Start, "uuid", p.UUID)
	}
	return nil
}

// setMode switches g's partition mode if it is not already as wanted.
// Turning it on is recorded first, so the agent turns it off again later.
func (m *Manager) setMode(ctx context.Context, g *inventory.GPU, on bool) error {
	if g.Partitioning == nil || g.Partitioning.Enabled == on {
		return nil
	}
	recorded := false
	if on && !slices.Contains(m.cp.PartitionModeOn, g.UUID) {
		if err := m.recordModeOn(g.UUID, true); err != nil {
			return err
		}
		recorded = true
	}
	if err := m.cfg.Backend.SetPartitionMode(ctx, g.UUID, on); err != nil {
		if recorded {
			// The switch changes nothing when it fails; neither does the record.
			_ = m.recordModeOn(g.UUID, false) // a stale entry only makes a later restore check this GPU
		}
		return withKind(ErrPartition, fmt.Errorf("turn partition mode %s on GPU %s: %w", onOff(on), g.UUID, err))
	}
	g.Partitioning.Enabled = on
	klog.FromContext(ctx).Info("Switched partition mode", "gpu", g.UUID, "mode", onOff(on))
	if !on {
		return m.recordModeOn(g.UUID, false)
	}
	return nil
}

// recordModeOn adds gpu to, or removes it from, the GPUs whose partition
// mode the agent turned on, and saves the checkpoint if that changed it.
func (m *Manager) recordModeOn(gpu string, on bool) error {
	if slices.Contains(m.cp.PartitionModeOn, gpu) == on {
		return nil
	}
	prev := m.cp.Clone()
	if on {
		m.cp.PartitionModeOn = append(m.cp.PartitionModeOn, gpu)
	} else {
		m.cp.PartitionModeOn = slices.DeleteFunc(m.cp.PartitionModeOn, func(s string) bool { return s == gpu })
	}
	return m.save(prev)
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// releasePartitions destroys the partitions c created, including one whose
// carve was not saved yet, then restores the partition mode of its GPUs
// that are left without partitions.
func (m *Manager) releasePartitions(ctx context.Context, c *checkpoint.Claim) error {
	var inv *inventory.Node
	touched := map[string]bool{}
	for _, d := range c.Devices {
		if d.Placement != nil {
			touched[d.GPUUUID] = true // its mode may have been switched for this claim
		}
		switch {
		case d.CreatedPartition && d.PartitionUUID != "":
			if err := m.destroyPartition(ctx, d.GPUUUID, d.PartitionUUID); err != nil {
				return withKind(ErrPartition, fmt.Errorf("destroy partition %s of %s: %w", d.PartitionUUID, d.Device, err))
			}
			touched[d.GPUUUID] = true
		case !d.CreatedPartition && d.Placement != nil && d.PartitionUUID == "":
			if inv == nil {
				var err error
				if inv, err = m.cfg.Backend.Discover(ctx); err != nil {
					return fmt.Errorf("discover partitions: %w", err)
				}
			}
			p := m.unownedAt(inv, c.UID, d)
			if p == nil {
				continue
			}
			klog.FromContext(ctx).Info("Destroying partition carved before the agent recorded it", "device", d.Device, "uuid", p.UUID)
			if err := m.destroyPartition(ctx, d.GPUUUID, p.UUID); err != nil {
				return withKind(ErrPartition, fmt.Errorf("destroy partition %s of %s: %w", p.UUID, d.Device, err))
			}
			touched[d.GPUUUID] = true
		}
	}
	return m.restoreModes(ctx, touched)
}

// unownedAt returns the partition at d's profile and placement if no claim
// other than uid records it.
func (m *Manager) unownedAt(inv *inventory.Node, uid string, d checkpoint.Device) *inventory.Partition {
	g := findGPU(inv, d.GPUUUID)
	if g == nil {
		return nil
	}
	owned := m.ownedPartitions(uid)
	for i := range g.Partitions {
		p := &g.Partitions[i]
		if p.Profile == d.Profile && p.Placement == *d.Placement && !owned[p.UUID] {
			return p
		}
	}
	return nil
}

// ownedPartitions is the set of partition UUIDs claims other than skipUID hold.
func (m *Manager) ownedPartitions(skipUID string) map[string]bool {
	owned := map[string]bool{}
	for uid, c := range m.cp.Claims {
		if uid == skipUID {
			continue
		}
		for _, d := range c.Devices {
			if d.PartitionUUID != "" {
				owned[d.PartitionUUID] = true
			}
		}
	}
	return owned
}

// restoreModes turns partition mode off on GPUs the agent turned it on for
// (only those in gpus, or all when gpus is nil) that have no partition left.
func (m *Manager) restoreModes(ctx context.Context, gpus map[string]bool) error {
	var todo []string
	for _, u := range m.cp.PartitionModeOn {
		if gpus == nil || gpus[u] {
			todo = append(todo, u)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	inv, err := m.cfg.Backend.Discover(ctx)
	if err != nil {
		return fmt.Errorf("discover partitions: %w", err)
	}
	for _, u := range todo {
		g := findGPU(inv, u)
		if g != nil && len(g.Partitions) > 0 {
			continue
		}
		if g != nil && g.Partitioning != nil && g.Partitioning.Enabled {
			if err := m.cfg.Backend.SetPartitionMode(ctx, u, false); err != nil {
				return withKind(ErrPartition, fmt.Errorf("turn partition mode off on GPU %s: %w", u, err))
			}
			klog.FromContext(ctx).Info("Switched partition mode", "gpu", u, "mode", "off")
		}
		if err := m.recordModeOn(u, false); err != nil {
			return err
		}
	}
	return nil
}

// sweepOrphans destroys, on GPUs partitioned dynamically, every partition
// that no claim records: left by a crash the checkpoint cannot explain, cut
// by hand, or surviving a lost checkpoint. Dynamic partitioning owns those
// GPUs' layout; a partition nobody owns would block placements the
// scheduler believes free. A partition that will not go (in use outside
// Kubernetes) is logged and left: the agent must still start. The driver
// then withholds its slices from the scheduler (Holds) and retries the
// sweep (SweepOrphans) until it goes.
func (m *Manager) sweepOrphans(ctx context.Context) (int, error) {
	if m.cfg.Partitioning != tslices.Dynamic {
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
	return m.sweepOrphans(ctx)
}

func (m *Manager) dynamic(g *inventory.GPU) bool {
	return m.cfg.Partitioning == tslices.Dynamic && tslices.IsDynamic(g, tslices.Dynamic)
}

func findGPU(n *inventory.Node, uuid string) *inventory.GPU {
	for i := range n.GPUs {
		if n.GPUs[i].UUID == uuid {
			return &n.GPUs[i]
		}
	}
	return nil
}

// Holds reports whether a claim in the checkpoint holds partition p of GPU
// gpu: records its UUID, or is carving it (its device names p's profile and
// placement and has no partition yet). The driver publishes with it so a
// partition nobody holds is withheld from the scheduler (slices.Options.Held).
func (m *Manager) Holds(gpu string, p *inventory.Partition) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.cp.Claims {
		for _, d := range c.Devices {
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
