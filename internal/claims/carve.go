package claims

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// Dynamic partitioning (publish.Dynamic): a claim allocated a MIG placement
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
		if d.dev.AdminAccess {
			// A monitor's device beside the claim's others: its GPU's MIG
			// mode is its holders' (admin.go).
			continue
		}
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
		if m.modal(g) {
			if err := m.carveMode(ctx, entry, i, d, g); err != nil {
				return err
			}
			continue
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
		if err := m.recordPartition(entry, i, d, p); err != nil {
			return err
		}
		logger.V(2).Info("Carved partition", "device", d.dev.Device, "gpu", g.UUID, "profile", p.Profile, "placement", p.Placement.Start, "uuid", p.UUID)
	}
	return nil
}

// recordPartition records the partition p made for device i of entry (a
// MIG slice carved, an AMD mode's partition taken) once it exists: after
// the crash point that finds it made but unrecorded. A failed save leaves
// the record without its UUID; rollback finds the partition by its
// placement.
func (m *Manager) recordPartition(entry *checkpoint.Claim, i int, d *planned, p *inventory.Partition) error {
	if err := m.crash(stepPartitionCarved); err != nil {
		return err
	}
	prev := m.keep(entry.UID)
	entry.Devices[i].PartitionUUID = p.UUID
	entry.Devices[i].CreatedPartition = true
	if err := m.save(prev); err != nil {
		return err
	}
	d.dev.Partition = p
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
	prev := m.keep("")
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

func (m *Manager) dynamic(g *inventory.GPU) bool {
	return m.cfg.Partitioning == publish.Dynamic && publish.IsDynamic(g, publish.Dynamic)
}

func findGPU(n *inventory.Node, uuid string) *inventory.GPU {
	for i := range n.GPUs {
		if n.GPUs[i].UUID == uuid {
			return &n.GPUs[i]
		}
	}
	return nil
}
