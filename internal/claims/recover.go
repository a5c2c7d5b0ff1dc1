package claims

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/cdi"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
)

// recover loads the checkpoint and finishes or undoes what a previous
// process left half done (see the package doc).
func (m *Manager) recover(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	cp, err := m.cfg.Store.Load()
	switch {
	case errors.Is(err, checkpoint.ErrCorrupt):
		logger.Error(err, "Checkpoint corrupt, moved aside; rebuilding prepared claims from CDI specs")
		cp, err = m.rebuild()
		if err != nil {
			return fmt.Errorf("rebuild checkpoint from CDI specs: %w", err)
		}
	case errors.Is(err, checkpoint.ErrLogCorrupt):
		// The state before the bad record is an older one: claims prepared
		// since are missing from it (their specs say what they hold, and
		// partitions carved for them must not be swept as orphans), and
		// some it holds may be gone. As for a rebuild, every claim is
		// confirmed again by the kubelet or yields its devices.
		logger.Error(err, "Checkpoint log corrupt, moved aside; recovering the state before the corrupt record, and the prepared claims of the CDI specs")
		if err := m.joinSpecs(cp); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("load checkpoint: %w", err)
	}
	if cp.BootID != "" && m.cfg.BootID != "" && cp.BootID != m.cfg.BootID {
		// A reboot dropped every partition a claim created and gave every
		// passed GPU back to its driver; the kubelet prepares surviving
		// pods again and ensureSpec rewrites their specs.
		logger.Info("Node rebooted since the checkpoint was written", "checkpointBootID", cp.BootID, "bootID", m.cfg.BootID)
		for _, c := range cp.Claims {
			c.Unconfirmed = true
			for i := range c.Devices {
				c.Devices[i].CreatedPartition = false
				if v := c.Devices[i].VFIO; v != nil {
					// Every device came up on its default driver.
					v.Bound = false
				}
			}
		}
	}
	cp.BootID = m.cfg.BootID
	m.cp = cp
	// The state is replaced whole: the first write (the rollbacks' below,
	// or the one after them) writes a snapshot of it.
	m.all = true

	for _, c := range sortedClaims(cp) {
		if c.State == checkpoint.PrepareCompleted {
			continue
		}
		logger.Info("Finishing interrupted claim operation", "claim", klog.KRef(c.Namespace, c.Name), "uid", c.UID, "state", c.State)
		if err := m.rollback(ctx, c); err != nil {
			return fmt.Errorf("recover claim %s/%s (%s): %w", c.Namespace, c.Name, c.UID, err)
		}
	}
	if err := m.persist(m.publishAll()); err != nil {
		return err
	}
	if _, err := m.sweepEffects(ctx, atStart); err != nil {
		return err
	}
	if _, err := m.ensurePrepared(ctx, atStart); err != nil {
		// A daemon that will not start fails its claim's next prepare, not
		// the agent: the other claims must keep being served.
		logger.Error(err, "Restoring sharing settings of prepared claims")
	}
	return m.removeOrphanSpecs(ctx)
}

// rebuild recreates completed entries from the claim specs on disk: a spec is
// written only after PrepareStarted and removed before an entry goes, so a
// spec on disk is the best record left of a prepared claim.
func (m *Manager) rebuild() (*checkpoint.Checkpoint, error) {
	cp := checkpoint.New()
	recs, err := m.cfg.CDI.ListClaimSpecs()
	if err != nil && !errors.Is(err, cdi.ErrBadSpec) {
		return nil, err
	}
	pub := m.cfg.Devices()
	for _, r := range recs {
		c := &checkpoint.Claim{UID: r.Claim.UID, Namespace: r.Claim.Namespace, Name: r.Claim.Name, State: checkpoint.PrepareCompleted, Updated: time.Now(), Unconfirmed: true}
		// The spec records each device as the checkpoint does; what it
		// cannot know (a carve) comes from the published devices.
		for _, cd := range r.Devices {
			e, ok := pub.Devices[cd.Device]
			if ok && cd.GPUUUID == "" {
				cd.GPUUUID = e.GPU.UUID
				if e.Partition != nil {
					cd.PartitionUUID = e.Partition.UUID
				}
			}
			if ok && e.Carve != nil && cd.PartitionUUID != "" && !cd.AdminAccess {
				// A dynamic placement: the agent carved it, so unprepare
				// must destroy it (unless a monitor only watches it:
				// its holder carved it); and on a GPU whose mode it may switch,
				// it switched MIG mode on for it (the record of that went
				// with the checkpoint), so it switches it off after.
				pl := e.Carve.Placement
				cd.Profile, cd.Placement, cd.CreatedPartition = e.Carve.Profile, &pl, true
				if pt := e.GPU.Partitioning; pt != nil && !pt.ModeChangeNeedsReset && !slices.Contains(cp.PartitionModeOn, e.GPU.UUID) {
					cp.PartitionModeOn = append(cp.PartitionModeOn, e.GPU.UUID)
				}
			}
			c.Devices = append(c.Devices, cd)
		}
		cp.Claims[c.UID] = c
	}
	return cp, nil
}

// removeOrphanSpecs deletes claim specs, and NCCL topology files, that no
// checkpoint entry owns.
func (m *Manager) removeOrphanSpecs(ctx context.Context) error {
	if err := m.cfg.CDI.RemoveStaleTemps(); err != nil {
		return fmt.Errorf("claim specs: %w", err)
	}
	recs, err := m.cfg.CDI.ListClaimSpecs()
	if errors.Is(err, cdi.ErrBadSpec) {
		// An unreadable spec cannot be tied to a claim; leave it for an
		// operator rather than refuse to start.
		klog.FromContext(ctx).Error(err, "Ignoring unreadable claim CDI specs")
	} else if err != nil {
		return fmt.Errorf("list claim specs: %w", err)
	}
	for _, r := range recs {
		if _, ok := m.cp.Claims[r.Claim.UID]; ok {
			continue
		}
		klog.FromContext(ctx).Info("Removing CDI spec of a claim that is not prepared", "claim", klog.KRef(r.Claim.Namespace, r.Claim.Name), "uid", r.Claim.UID)
		if err := m.cfg.CDI.RemoveClaimSpec(r.Claim.UID); err != nil {
			return err
		}
	}
	// A topology file is written before its spec and removed after it: a
	// crash between the two leaves a file no entry owns.
	removed, err := m.cfg.CDI.RemoveOrphanTopologyFiles(func(uid string) bool {
		_, ok := m.cp.Claims[uid]
		return ok
	})
	for _, uid := range removed {
		klog.FromContext(ctx).Info("Removed NCCL topology file of a claim that is not prepared", "uid", uid)
	}
	return err
}

// joinSpecs adds to cp, the state before a corrupt log record, what the
// CDI specs say is prepared that it lacks, and marks every claim
// unconfirmed, as a rebuild does.
func (m *Manager) joinSpecs(cp *checkpoint.Checkpoint) error {
	specs, err := m.rebuild()
	if err != nil {
		return fmt.Errorf("rebuild checkpoint from CDI specs: %w", err)
	}
	for _, c := range cp.Claims {
		c.Unconfirmed = true
	}
	for uid, c := range specs.Claims {
		if _, ok := cp.Claims[uid]; !ok {
			cp.Claims[uid] = c
		}
	}
	for _, g := range specs.PartitionModeOn {
		if !slices.Contains(cp.PartitionModeOn, g) {
			cp.PartitionModeOn = append(cp.PartitionModeOn, g)
		}
	}
	return nil
}
