package claims

import (
	"context"
	"fmt"

	"github.com/tessera-gpu/tessera/internal/cdi"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/isolation"
	"github.com/tessera-gpu/tessera/internal/memlimit"
)

// memoryLimits is the kernel memory limit of a device whose share the
// kernel holds (internal/memlimit, docs/sharing.md): its spec runs the
// hook, which sets the limit on each container's cgroup before its process
// starts and records it, and forgets it when the container stops. Prepare
// changes nothing on the node, so it plans nothing and a claim it alone
// concerns stays plain; its undo forgets the records of containers whose
// poststop hook never ran (the runtime died first). The kubelet
// unprepares a claim only when no container of the node uses it, so every
// record left then is such a one. The records are the claim's alone (by
// its UID), so a plain claim's unprepare forgets them too, without the
// state lock; a crash before its entry goes is finished by the next
// attempt or by recovery's rollback.
type memoryLimits struct{ nothing }

func (memoryLimits) plan(*Manager, *planned, *checkpoint.Device) bool { return false }

func (memoryLimits) holds(checkpoint.Device) bool { return false }

func (memoryLimits) apply(context.Context, *Manager, *checkpoint.Claim, []planned) error {
	return nil
}

func (memoryLimits) claimOwned() bool { return true }

func (memoryLimits) undo(_ context.Context, m *Manager, c *checkpoint.Claim) error {
	if m.cfg.MemoryLimits == nil {
		return nil
	}
	if err := m.cfg.MemoryLimits.Release(c.UID); err != nil {
		return withKind(ErrSharing, fmt.Errorf("release memory limits: %w", err))
	}
	return m.crash(stepLimitsReleased)
}

// edits gives each device with a limit the kernel holds (the isolation
// assessed for it is Kernel) the hook's createRuntime and poststop hooks.
func (memoryLimits) edits(m *Manager, s *claimSpec) error {
	if m.cfg.MemoryLimits == nil {
		return nil
	}
	for i := range s.Devices {
		d := &s.Devices[i]
		a := s.isolation[i]
		share := limitBytes(d)
		if share == 0 || a.Level != isolation.Kernel {
			continue
		}
		b, err := memlimit.Bytes(share)
		if err != nil {
			return fmt.Errorf("device %s/%s: %w", d.Pool, d.Device, err)
		}
		// A share bounds the claim: one container holds it at a time. An
		// MPS claim owns its device, and its pinned memory limit is per
		// client, as MPS applies it: each container gets its own.
		l := memlimit.Limit{ClaimUID: s.Claim.UID, Claim: s.Claim.Namespace + "/" + s.Claim.Name, Device: d.Device,
			Mechanism: a.Mechanism, Region: a.Region, Bytes: b, EachContainer: !d.Sharing.IsShare()}
		if a.Mechanism == memlimit.NVML {
			l.GPU = d.GPU.UUID
		}
		d.Edits.Hooks = append(d.Edits.Hooks, m.cfg.MemoryLimits.Hook.Hooks(l)...)
	}
	return nil
}

// limitBytes is the memory a device's containers are limited to: a
// share's, or an MPS config's pinned memory limit; 0 for none.
func limitBytes(d *cdi.ClaimDevice) int64 {
	switch {
	case d.Sharing.IsShare():
		return d.Sharing.Share.MemoryBytes
	case d.Sharing.IsMPS():
		return d.Sharing.MPSPinnedMemoryLimit
	}
	return 0
}
