package claims

import (
	"context"
	"fmt"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// releasePartitions destroys the partitions c created, including one whose
// carve was not saved yet, then restores the partition mode of its GPUs
// that are left without partitions.
func (m *Manager) releasePartitions(ctx context.Context, c *checkpoint.Claim) error {
	var inv *inventory.Node
	touched := map[string]bool{}
	modal, err := m.modalGPUs(ctx, c)
	if err != nil {
		return err
	}
	for _, d := range c.Devices {
		if d.Placement != nil {
			touched[d.GPUUUID] = true // its mode may have been switched for this claim
		}
		if modal[d.GPUUUID] {
			continue // a mode's partitions go with the mode (modes.go)
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
	if err := m.releaseModes(ctx, c, modal); err != nil {
		return err
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
			if holding(d) && d.PartitionUUID != "" {
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
		if g != nil && (len(g.Partitions) > 0 || m.modal(g)) {
			continue // a GPU of modes goes back to rest in restModes
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
