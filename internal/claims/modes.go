package claims

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// GPUs whose partitions are a mode of the whole GPU (publish.IsModal: AMD
// compute partitions SPX, DPX, QPX, CPX) are carved by setting the mode,
// part of the partitions effect (effect_partitions.go). Every step is
// recorded before it is taken:
//
//	save PrepareStarted with each device's mode (Profile) and placement
//	-> record the GPU in PartitionModeOn (the agent changed its mode)
//	-> write the mode (backend.ModeSwitcher) -> wait for the partition at
//	the placement to appear -> save its UUID -> CDI spec -> PrepareCompleted
//
// A mode changes only while no other claim holds a device of the GPU (the
// allocator's counters keep two modes apart, so this refusal means the
// node and the scheduler disagree: it is said plainly, naming the holder).
// Admission refuses it (checkConflicts: a placement's footprint carries its
// mode), so a holder the API server proves gone is released by the
// stale-claim release (stale.go) and the prepare goes on, as for a device
// conflict. Releasing destroys
// nothing, as a mode's partitions cannot go one by one: when the last
// claim holding a device of the GPU goes, the GPU returns to its rest mode
// (publish.RestMode: SPX, whole) and leaves PartitionModeOn. A crash at any
// point leaves the GPU in PartitionModeOn or already at rest; rollback and
// the start-up sweep bring a GPU no claim holds back to rest, so the
// published devices and the hardware agree again.

// DefaultModeChangeTimeout is how long prepare waits for a new mode's
// partitions to appear. amd-smi gives a partition change a 140 s budget
// (ROCm/legacy-rocm-build#4439); twice that leaves room.
const DefaultModeChangeTimeout = 5 * time.Minute

// modePollInterval is how often the wait for a mode's partitions reads the
// inventory.
const modePollInterval = 100 * time.Millisecond

func (m *Manager) modeClock() clock.WithTicker {
	if m.cfg.ModeClock != nil {
		return m.cfg.ModeClock
	}
	return clock.RealClock{}
}

func (m *Manager) modeTimeout() time.Duration {
	if m.cfg.ModeChangeTimeout > 0 {
		return m.cfg.ModeChangeTimeout
	}
	return DefaultModeChangeTimeout
}

// modal reports whether g is partitioned dynamically by its mode.
func (m *Manager) modal(g *inventory.GPU) bool {
	return m.dynamic(g) && publish.IsModal(g)
}

// carveMode gives device i of entry its partition on g, a GPU of modes:
// the GPU is set to the device's mode if it is not in it, and the
// partition at its placement is recorded as the claim's. For a whole GPU
// (carve nil) the GPU is set to its whole mode.
func (m *Manager) carveMode(ctx context.Context, entry *checkpoint.Claim, i int, d *planned, g *inventory.GPU) error {
	logger := klog.FromContext(ctx)
	want := publish.RestMode(g)
	if d.carve != nil {
		want = d.carve.Profile
	}
	if g.Partitioning.Mode != want {
		if err := m.switchMode(ctx, entry.UID, g, want); err != nil {
			return fmt.Errorf("device %s: %w", d.dev.Device, err)
		}
	}
	if d.carve == nil {
		return nil
	}
	p, err := m.awaitPartition(ctx, g.UUID, d.carve.Profile, d.carve.Placement)
	if err != nil {
		return withKind(ErrPartition, fmt.Errorf("device %s: %w", d.dev.Device, err))
	}
	if err := m.recordPartition(entry, i, d, p); err != nil {
		return err
	}
	logger.V(2).Info("Took partition of mode", "device", d.dev.Device, "gpu", g.UUID, "mode", p.Profile, "placement", p.Placement.Start, "uuid", p.UUID)
	return nil
}

// switchMode sets g to mode, refusing where a claim other than uid holds a
// device of g. The GPU is recorded in PartitionModeOn first, so that a
// crash after the write still finds it to bring back to rest.
func (m *Manager) switchMode(ctx context.Context, uid string, g *inventory.GPU, mode string) error {
	if holder := m.gpuHolder(g.UUID, uid); holder != "" {
		return withKind(ErrDeviceInUse, modeRefusal(g.UUID, g.Partitioning.Mode, holder, mode))
	}
	ms, ok := m.cfg.Backend.(backend.ModeSwitcher)
	if !ok {
		return withKind(ErrPartition, fmt.Errorf("GPU %s: backend %s cannot set partition modes", g.UUID, m.cfg.Backend.Name()))
	}
	if mode != publish.RestMode(g) {
		if err := m.recordModeOn(g.UUID, true); err != nil {
			return err
		}
	}
	from := g.Partitioning.Mode
	err := m.observePartition(PartitionMode, func() error { return ms.SwitchMode(ctx, g.UUID, mode) })
	if err != nil {
		return withKind(ErrPartition, fmt.Errorf("set partition mode of GPU %s from %s to %s: %w", g.UUID, from, mode, err))
	}
	g.Partitioning.Mode = mode
	klog.FromContext(ctx).Info("Switched partition mode", "gpu", g.UUID, "from", from, "to", mode)
	if mode == publish.RestMode(g) {
		return m.recordModeOn(g.UUID, false)
	}
	return nil
}

// modeRefusal is the refusal of mode on gpu, in mode cur, while claim
// holder holds a device of it. Admission says it (checkConflicts), with the
// holder a suspect for the stale-claim release like any device's holder;
// switchMode says it only for a holder admission does not count, a
// monitor's claim (admin.go). It names the holder by UID, which tells the
// refused claim's owner nothing of another namespace's claims.
func modeRefusal(gpu, cur, holder, mode string) error {
	return fmt.Errorf("GPU %s is in partition mode %s and claim %s holds a device of it: the mode cannot change to %s until it is released", gpu, cur, holder, mode)
}

// awaitPartition waits until the GPU's partition of mode at pl appears (the
// driver enumerates a new mode's partitions after the write) and returns
// it, reading the inventory now and then every modePollInterval of the
// manager's clock, up to the mode change timeout. The GPU's mode is a
// claim's (m.mu is held): nobody else changes it meanwhile.
func (m *Manager) awaitPartition(ctx context.Context, gpu, mode string, pl inventory.Placement) (*inventory.Partition, error) {
	clk := m.modeClock()
	deadline := clk.Now().Add(m.modeTimeout())
	for {
		inv, err := m.cfg.Backend.Discover(ctx)
		if err != nil {
			return nil, fmt.Errorf("discover partitions: %w", err)
		}
		g := findGPU(inv, gpu)
		if g == nil {
			return nil, withKind(ErrDeviceNotOnNode, fmt.Errorf("GPU %s is gone", gpu))
		}
		if g.Partitioning != nil && g.Partitioning.Mode != mode {
			return nil, fmt.Errorf("GPU %s is in mode %s, not %s: changed by someone else while the partition was awaited", gpu, g.Partitioning.Mode, mode)
		}
		for k := range g.Partitions {
			if p := &g.Partitions[k]; p.Profile == mode && p.Placement == pl {
				return p, nil
			}
		}
		if !clk.Now().Before(deadline) {
			return nil, fmt.Errorf("GPU %s: no %s partition at %d %v after the mode was set", gpu, mode, pl.Start, m.modeTimeout())
		}
		// A timer per wait rather than a ticker: a fake clock then has a
		// waiter exactly while this waits, which a test steps.
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for GPU %s's %s partition at %d: %w", gpu, mode, pl.Start, ctx.Err())
		case <-clk.After(modePollInterval):
		}
	}
}

// gpuHolder is a claim other than skipUID that holds (or is preparing) a
// device of GPU gpu, "" if none.
func (m *Manager) gpuHolder(gpu, skipUID string) string {
	uids := make([]string, 0, len(m.cp.Claims))
	for uid := range m.cp.Claims {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	for _, uid := range uids {
		if uid == skipUID {
			continue
		}
		for _, d := range m.cp.Claims[uid].Devices {
			if d.GPUUUID == gpu {
				return uid
			}
		}
	}
	return ""
}

// restMode brings g, a GPU of modes, back to its rest mode if no claim
// other than skipUID holds a device of it; it reports whether g is at rest.
func (m *Manager) restMode(ctx context.Context, g *inventory.GPU, skipUID string) (bool, error) {
	rest := publish.RestMode(g)
	if g.Partitioning.Mode == rest {
		return true, m.recordModeOn(g.UUID, false)
	}
	if m.gpuHolder(g.UUID, skipUID) != "" {
		return false, nil
	}
	if err := m.switchMode(ctx, skipUID, g, rest); err != nil {
		return false, err
	}
	return true, nil
}

// restModes brings every GPU of modes in gpus (all when nil) that no claim
// other than skipUID holds back to its rest mode.
func (m *Manager) restModes(ctx context.Context, inv *inventory.Node, gpus map[string]bool, skipUID string) error {
	var errs []error
	for i := range inv.GPUs {
		g := &inv.GPUs[i]
		if !m.modal(g) || (gpus != nil && !gpus[g.UUID]) {
			continue
		}
		if _, err := m.restMode(ctx, g, skipUID); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// modalGPUs is the set of c's GPUs whose partitions are a mode, known from
// the devices the node publishes, and read from the inventory only for a
// GPU they lack (one gone since): a MIG claim's release reads nothing more.
func (m *Manager) modalGPUs(ctx context.Context, c *checkpoint.Claim) (map[string]bool, error) {
	if m.cfg.Partitioning != publish.Dynamic {
		return nil, nil
	}
	want := map[string]bool{}
	for _, d := range c.Devices {
		if d.Placement != nil || d.PartitionUUID != "" {
			want[d.GPUUUID] = true
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	out := map[string]bool{}
	if pub := m.cfg.Devices(); pub != nil {
		for _, e := range pub.Devices {
			if e.GPU != nil && want[e.GPU.UUID] {
				out[e.GPU.UUID] = m.modal(e.GPU)
				delete(want, e.GPU.UUID)
			}
		}
	}
	if len(want) == 0 {
		return out, nil
	}
	inv, err := m.cfg.Backend.Discover(ctx)
	if err != nil {
		return nil, fmt.Errorf("discover partitions: %w", err)
	}
	for u := range want {
		if g := findGPU(inv, u); g != nil {
			out[u] = m.modal(g)
		}
	}
	return out, nil
}

// releaseModes brings c's GPUs of modes back to rest where no other claim
// holds a device of them: the mode's partitions go with the mode.
func (m *Manager) releaseModes(ctx context.Context, c *checkpoint.Claim, modal map[string]bool) error {
	some := false
	for _, v := range modal {
		some = some || v
	}
	if !some {
		return nil
	}
	inv, err := m.cfg.Backend.Discover(ctx)
	if err != nil {
		return fmt.Errorf("discover partitions: %w", err)
	}
	gpus := map[string]bool{}
	for u, v := range modal {
		if v {
			gpus[u] = true
		}
	}
	return m.restModes(ctx, inv, gpus, c.UID)
}
