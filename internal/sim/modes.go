package sim

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/gpuvendor/vendors"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// Partitions that are a GPU-wide mode (gpuvendor.Capabilities.PartitionModes:
// AMD's SPX, DPX, QPX, CPX), as amdgpu has them:
//
//   - A GPU is in one mode; every partition of it is of that mode, and all
//     of the mode's partitions exist (one KFD node each). The whole mode
//     (SPX, one partition) has none: the GPU is whole.
//   - The memory mode (NPS1, NPS4) decides which compute modes can be set
//     (available_compute_partition); the machine file says which
//     (computeModes). It changes only with a driver reload, which the
//     simulator does not do.
//   - SwitchMode is a write of current_compute_partition: it returns at once,
//     the old mode's partitions are gone, and the new mode's appear once the
//     driver has enumerated them, ModeChangeTime later (the GPU's KFD nodes
//     and render nodes: modeStore.settle). A partition a process outside the
//     driver holds (inUse) makes the GPU refuse the change.
//   - Partition k uses the DRM nodes amdgpu made for it when it probed the
//     GPU: partition 0 the GPU's own card and render nodes, the others the
//     amdgpu_xcp devices' (xcpMinors), so a mode change renumbers nothing.
//     The real MI308X capture (test/fixtures/amd/mi308x-cpx) shows both:
//     each GPU's partitions' render minors start at the GPU's and step by
//     one, and the next GPU's start eight further on.

var memoryModeRE = regexp.MustCompile(`^NPS[0-9]+$`)

// modes checks a type's mode settings and applies them to g's
// partitioning: the profiles become those its memory mode allows. It
// returns how long a mode change takes.
func (b *builder) modes(path string, g *inventory.GPU, p *filePartitioning) time.Duration {
	pt := g.Partitioning
	set := p.MemoryMode != "" || p.ComputeModes != nil || p.ModeChangeTime != ""
	if !vendors.Capabilities(g.Vendor).PartitionModes {
		if set {
			b.errorf(path, "memoryMode, computeModes and modeChangeTime are for partitions that are a GPU-wide mode (%s), not %s", modalKinds(), p.Kind)
		}
		return 0
	}
	var took time.Duration
	if p.ModeChangeTime != "" {
		d, err := time.ParseDuration(p.ModeChangeTime)
		if err != nil || d < 0 {
			b.errorf(path+".modeChangeTime", "%q is not a duration of 0 or more (want e.g. 3s)", p.ModeChangeTime)
		}
		took = d
	}
	if p.MemoryMode != "" && !memoryModeRE.MatchString(p.MemoryMode) {
		b.errorf(path+".memoryMode", "%q is not a memory partition mode (want NPS1, NPS4, ...)", p.MemoryMode)
	}
	pt.MemoryMode = p.MemoryMode
	if p.ComputeModes == nil {
		return took
	}
	for _, mm := range slices.Sorted(maps.Keys(p.ComputeModes)) {
		if !memoryModeRE.MatchString(mm) {
			b.errorf(path+".computeModes."+mm, "%q is not a memory partition mode (want NPS1, NPS4, ...)", mm)
		}
		for i, name := range p.ComputeModes[mm] {
			if pt.Profile(name) == nil {
				b.errorf(fmt.Sprintf("%s.computeModes.%s[%d]", path, mm, i), "mode %q is not in profile table %s", name, p.Profiles)
			}
		}
	}
	allowed, ok := p.ComputeModes[p.MemoryMode]
	if !ok {
		b.errorf(path+".memoryMode", "%q is not among computeModes' memory modes (%s)", p.MemoryMode, strings.Join(slices.Sorted(maps.Keys(p.ComputeModes)), ", "))
		return took
	}
	pt.Profiles = slices.DeleteFunc(pt.Profiles, func(pr inventory.PartitionProfile) bool { return !slices.Contains(allowed, pr.Name) })
	return took
}

// initialMode sets the mode GPU idx starts in: its partitions' profile, or
// the whole mode where it has none; one its memory mode allows.
func (b *builder) initialMode(path string, idx int) {
	g := &b.m.Node.GPUs[idx]
	if !vendors.Capabilities(g.Vendor).PartitionModes || g.Partitioning == nil {
		return
	}
	pt := g.Partitioning
	switch {
	case len(g.Partitions) > 0:
		pt.Mode = g.Partitions[0].Profile
		for k := range g.Partitions {
			g.Partitions[k].MemoryPartitionMode = pt.MemoryMode
		}
	case !pt.Enabled:
		if w := wholeMode(pt); w != nil {
			pt.Mode = w.Name
		} else {
			b.errorf(path, "GPU %d starts whole, but no whole mode (a profile of one placement) is allowed under memory mode %s (%s): list its partitions", idx, pt.MemoryMode, profileNames(pt))
		}
	}
}

// wholeMode is the mode of pt that leaves the GPU whole (one placement).
func wholeMode(pt *inventory.Partitioning) *inventory.PartitionProfile {
	for i := range pt.Profiles {
		if len(pt.Profiles[i].Placements) == 1 {
			return &pt.Profiles[i]
		}
	}
	return nil
}

func modalKinds() string {
	var out []string
	for _, v := range vendors.All() {
		if c := v.Capabilities(); c.PartitionModes {
			out = append(out, string(c.PartitionKind))
		}
	}
	return strings.Join(out, ", ")
}

// xcpMinors are the card and render minors of partition k of g: the GPU's
// own for partition 0; for the others, those of the amdgpu_xcp devices the
// driver made for g when it probed it, a block of one fewer than g's
// compute slices (CPX's partition count) per GPU, after every AMD GPU's own
// minors, in GPU order.
func xcpMinors(n *inventory.Node, g *inventory.GPU, k int) (card, render int) {
	if k == 0 {
		return g.Minor, g.RenderMinor
	}
	cardBase, renderBase, offset := 0, 128, 0
	for i := range n.GPUs {
		o := &n.GPUs[i]
		if o.Vendor != inventory.VendorAMD {
			continue
		}
		cardBase, renderBase = max(cardBase, o.Minor+1), max(renderBase, o.RenderMinor+1)
	}
	for i := range n.GPUs {
		o := &n.GPUs[i]
		if o.UUID == g.UUID {
			break
		}
		if o.Vendor == inventory.VendorAMD && o.Partitioning != nil {
			offset += max(o.Partitioning.ComputeSlices-1, 0)
		}
	}
	return cardBase + offset + k - 1, renderBase + offset + k - 1
}

// ModeChange is a mode change the driver has not finished enumerating: the
// mode set, and when its partitions appear.
type ModeChange struct {
	Mode    string    `json:"mode"`
	ReadyAt time.Time `json:"readyAt"`
}

// SwitchMode implements backend.ModeSwitcher as amdgpu's
// current_compute_partition does: the old mode's partitions go at once and
// the new mode's appear when the driver has enumerated them, the machine's
// ModeChangeTime later (Discover shows them from then on). Setting the mode
// the GPU is in, or is changing to, changes nothing. A mode the memory mode
// does not allow, a GPU whose partitions are not a mode, and a GPU with a
// partition a process outside the driver holds are refused, changing
// nothing.
func (b *Backend) SwitchMode(ctx context.Context, gpuUUID, mode string) error {
	logger := klog.FromContext(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.settle(logger)
	g, err := b.gpu(gpuUUID)
	if err != nil {
		return err
	}
	pt := g.Partitioning
	switch {
	case pt == nil || !vendors.Capabilities(g.Vendor).PartitionModes:
		return fmt.Errorf("sim: GPU %s (%s) has no partition modes", gpuUUID, g.ProductName)
	case pt.Profile(mode) == nil:
		return fmt.Errorf("sim: GPU %s: mode %q cannot be set under memory mode %s (it can be: %s)", gpuUUID, mode, pt.MemoryMode, profileNames(pt))
	case pt.Mode == mode:
		return nil
	}
	for _, p := range g.Partitions {
		if b.inUse[p.UUID] {
			return fmt.Errorf("sim: GPU %s: partition %s is in use by a process outside the driver, so the mode cannot change from %s to %s", gpuUUID, p.UUID, pt.Mode, mode)
		}
	}
	before := b.node.Clone()
	g.Partitions = nil
	pt.Mode = mode
	pt.Enabled = len(pt.Profile(mode).Placements) > 1
	b.pending[gpuUUID] = ModeChange{Mode: mode, ReadyAt: b.clock.Now().Add(b.machine.ModeChangeTime[gpuUUID])}
	if err := b.commit(logger, before); err != nil {
		b.node = *before
		delete(b.pending, gpuUUID)
		return fmt.Errorf("sim: setting mode %s on GPU %s: %w", mode, gpuUUID, err)
	}
	logger.V(2).Info("Switching partition mode", "gpu", gpuUUID, "mode", mode, "ready", b.pending[gpuUUID].ReadyAt)
	b.settle(logger)
	return nil
}

// settle finishes the mode changes whose time has come: the new mode's
// partitions appear, each with its device nodes. The caller holds mu.
func (b *Backend) settle(logger klog.Logger) {
	now := b.clock.Now()
	var due []string
	for u, p := range b.pending {
		if !now.Before(p.ReadyAt) {
			due = append(due, u)
		}
	}
	if len(due) == 0 {
		return
	}
	slices.Sort(due)
	before := b.node.Clone()
	for _, u := range due {
		g, err := b.gpu(u)
		if err != nil {
			continue
		}
		pr := g.Partitioning.Profile(b.pending[u].Mode)
		g.Partitions = nil
		if pr != nil && len(pr.Placements) > 1 {
			for k, pl := range pr.Placements {
				p := inventory.Partition{
					Kind: g.Partitioning.Kind, Profile: pr.Name, Placement: pl, GPUInstanceID: k,
					UUID:        partitionUUID(g.Partitioning.Kind, g.UUID, b.bootID, strconv.FormatUint(b.serial, 10), strconv.Itoa(k)),
					MemoryBytes: pr.MemoryBytes, ComputeUnits: pr.ComputeUnits, Engines: maps.Clone(pr.Engines),
					MemoryPartitionMode: g.Partitioning.MemoryMode,
				}
				p.Minor, p.RenderMinor = xcpMinors(&b.node, g, k)
				g.Partitions = append(g.Partitions, p)
			}
			b.serial++
		}
		delete(b.pending, u)
	}
	if err := b.commit(logger, before); err != nil {
		// The hardware finished; only the record of it failed. Kept in
		// memory, written with the next change.
		logger.Error(err, "Saving the partitions of a finished mode change")
	}
	for _, u := range due {
		logger.V(2).Info("Partition mode change done", "gpu", u)
	}
}

// commit saves the state and brings the device tree from before's nodes
// to the current state's. The caller holds mu.
func (b *Backend) commit(logger klog.Logger, before *inventory.Node) error {
	if err := b.save(); err != nil {
		return err
	}
	old, err := nodeDevices(before)
	if err != nil {
		return err
	}
	now, err := nodeDevices(&b.node)
	if err != nil {
		return err
	}
	b.changes++
	b.devs.remove(logger, missing(old, now))
	return b.devs.create(logger, missing(now, old))
}

// missing is the nodes of a whose paths b lacks.
func missing(a, b []devNode) []devNode {
	has := map[string]bool{}
	for _, n := range b {
		has[n.path] = true
	}
	var out []devNode
	for _, n := range a {
		if !has[n.path] {
			out = append(out, n)
		}
	}
	return out
}
