package claims

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/pkg/backend"
	"github.com/tessera-gpu/tessera/pkg/cdi"
	"github.com/tessera-gpu/tessera/pkg/checkpoint"
	"github.com/tessera-gpu/tessera/pkg/sharing"
)

// Sharing settings (time-slice interval, MPS) ride the same records as
// partitions: resolved from the allocation's configs, saved with
// PrepareStarted, then applied after any carve and before the CDI spec:
//
//	save PrepareStarted (each device's Sharing) -> carve -> set intervals,
//	start the claim's MPS daemon -> CDI spec (pipe mount, CUDA_MPS_* env)
//	-> PrepareCompleted
//
// Rollback stops the claim's daemon (found by the claim's UID whether or not
// its start was finished) before its partitions go, and gives each GPU the
// default interval back once no claim holds one on it. A GPU's interval is
// one setting: a claim asking a different one than a prepared claim holds
// on that GPU is refused.

// resolveSharing fills each device's Sharing from the claim's configs.
func (m *Manager) resolveSharing(claim *resourceapi.ResourceClaim, devs []planned) error {
	in := make([]sharing.Device, len(devs))
	for i, d := range devs {
		sd := sharing.Device{Request: d.dev.Request, Name: d.dev.Device, Vendor: d.dev.GPU.Vendor, MemoryBytes: d.dev.GPU.MemoryBytes, ComputeUnits: d.dev.GPU.ComputeUnits, Share: d.share}
		switch {
		case d.carve != nil:
			sd.Partition = true
			sd.MemoryBytes = profileMemory(d)
		case d.dev.Partition != nil:
			sd.Partition = true
			sd.MemoryBytes, sd.ComputeUnits = d.dev.Partition.MemoryBytes, d.dev.Partition.ComputeUnits
		}
		in[i] = sd
	}
	out, err := sharing.Resolve(m.cfg.DriverName, claim.Status.Allocation.Devices.Config, in)
	if err != nil {
		return err
	}
	for i := range devs {
		devs[i].dev.Sharing = out[i]
	}
	return nil
}

func profileMemory(d planned) int64 {
	if pt := d.dev.GPU.Partitioning; pt != nil {
		for _, p := range pt.Profiles {
			if p.Name == d.carve.Profile {
				return p.MemoryBytes
			}
		}
	}
	return 0
}

// checkIntervals refuses a time-slice interval on a GPU where another
// prepared claim holds a different one.
func (m *Manager) checkIntervals(uid string, devs []planned) error {
	var errs []string
	for _, d := range devs {
		want, ok := d.dev.Sharing.Interval()
		if !ok {
			continue
		}
		for _, o := range sortedClaims(m.cp) {
			if o.UID == uid {
				continue
			}
			for _, od := range o.Devices {
				if have, ok := od.Sharing.Interval(); ok && od.GPUUUID == d.dev.GPU.UUID && have != want {
					errs = append(errs, fmt.Sprintf("device %s asks time-slice interval %s, but its GPU %s runs at %s for claim %s/%s", d.dev.Device, want, d.dev.GPU.UUID, have, o.Namespace, o.Name))
				}
			}
		}
	}
	if len(errs) > 0 {
		return withKind(ErrDeviceInUse, errors.New(strings.Join(errs, "; ")))
	}
	return nil
}

// applySharing sets the intervals of devs' GPUs and starts (or adopts) the
// MPS daemons they run under, telling each MPS device where its pipes are.
func (m *Manager) applySharing(ctx context.Context, uid string, devs []planned) error {
	for _, d := range devs {
		if ts, ok := d.dev.Sharing.Interval(); ok {
			if err := m.cfg.Backend.SetTimeSlice(ctx, d.dev.GPU.UUID, ts); err != nil {
				return withKind(ErrSharing, fmt.Errorf("device %s: set time-slice interval %s: %w", d.dev.Device, ts, err))
			}
		}
	}
	cds := cdiDevices(devs)
	if _, err := m.startDaemons(ctx, uid, cds); err != nil {
		return err
	}
	for i := range devs {
		devs[i].dev.MPSPipeDir = cds[i].MPSPipeDir
	}
	return nil
}

// daemonSpecs returns the MPS daemons a claim's devices run under: the
// claim's own (devices it has to itself with an MPS config) and the shared
// daemon of each device it holds an enforced capacity share of. of[i] is
// device i's daemon in specs, -1 for none.
func daemonSpecs(uid string, devs []cdi.ClaimDevice) (specs []backend.MPSDaemonSpec, of []int) {
	of = make([]int, len(devs))
	own := -1
	for i, d := range devs {
		of[i] = -1
		s := d.Sharing
		u := deviceUUID(d)
		switch {
		case s.SharedDaemon():
			id := sharedDaemonID(u)
			j := slices.IndexFunc(specs, func(sp backend.MPSDaemonSpec) bool { return sp.ID == id })
			if j < 0 {
				// No defaults: each share's limits are its clients' (CDI env).
				specs = append(specs, backend.MPSDaemonSpec{ID: id, Devices: []string{u}})
				j = len(specs) - 1
			}
			of[i] = j
		case s.ClaimDaemon():
			if own < 0 {
				specs = append(specs, backend.MPSDaemonSpec{ID: uid, ActiveThreadPercentage: s.MPSActiveThreadPercentage, PinnedMemoryLimits: map[string]int64{}})
				own = len(specs) - 1
			}
			specs[own].Devices = append(specs[own].Devices, u)
			if s.MPSPinnedMemoryLimit > 0 {
				specs[own].PinnedMemoryLimits[u] = s.MPSPinnedMemoryLimit
			}
			of[i] = own
		}
	}
	return specs, of
}

// sharedDaemonID names the MPS daemon serving every capacity share of the
// device with uuid (a GPU or MIG UUID): MPS runs one server per GPU, so the
// shares of one device cannot each have their own.
func sharedDaemonID(uuid string) string { return "share-" + uuid }

// deviceUUID is what CUDA calls the device: the partition's UUID or the GPU's.
func deviceUUID(d cdi.ClaimDevice) string {
	if d.Partition != nil {
		return d.Partition.UUID
	}
	return d.GPU.UUID
}

// startDaemons starts (or adopts) the MPS daemons devs run under and sets
// each MPS device's MPSPipeDir. It returns how many were started rather
// than adopted.
func (m *Manager) startDaemons(ctx context.Context, uid string, devs []cdi.ClaimDevice) (started int, err error) {
	specs, of := daemonSpecs(uid, devs)
	daemons := make([]*backend.MPSDaemon, len(specs))
	for i, spec := range specs {
		d, err := m.cfg.Backend.StartMPS(ctx, spec)
		if err != nil {
			return started, withKind(ErrSharing, fmt.Errorf("start MPS daemon %s: %w", spec.ID, err))
		}
		if !d.Adopted {
			started++
		}
		daemons[i] = d
		klog.FromContext(ctx).V(2).Info("MPS daemon running", "id", spec.ID, "devices", spec.Devices, "pipeDir", d.PipeDir, "pid", d.PID, "adopted", d.Adopted)
	}
	for i := range devs {
		if of[i] >= 0 {
			devs[i].MPSPipeDir = daemons[of[i]].PipeDir
		}
	}
	return started, nil
}

func usesMPS(c *checkpoint.Claim) bool {
	return slices.ContainsFunc(c.Devices, func(d checkpoint.Device) bool { return d.Sharing.IsMPS() })
}

// stopDaemons stops c's own MPS daemon, if it has one, and the shared
// daemon of each device it holds a share of that no other claim shares.
func (m *Manager) stopDaemons(ctx context.Context, c *checkpoint.Claim) error {
	var errs []error
	if slices.ContainsFunc(c.Devices, func(d checkpoint.Device) bool { return d.Sharing.ClaimDaemon() }) {
		if err := m.cfg.Backend.StopMPS(ctx, c.UID); err != nil {
			errs = append(errs, fmt.Errorf("stop MPS daemon: %w", err))
		}
	}
	for _, id := range sharedDaemonIDs(c) {
		if m.sharedDaemonHeldByOther(c.UID, id) {
			continue
		}
		if err := m.cfg.Backend.StopMPS(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("stop shared MPS daemon %s: %w", id, err))
		}
	}
	return withKind(ErrSharing, errors.Join(errs...))
}

// sharedDaemonIDs are the shared daemons c's shares run under.
func sharedDaemonIDs(c *checkpoint.Claim) []string {
	var out []string
	for _, d := range c.Devices {
		if !d.Sharing.SharedDaemon() {
			continue
		}
		u := d.GPUUUID
		if d.PartitionUUID != "" {
			u = d.PartitionUUID
		}
		if id := sharedDaemonID(u); !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

func (m *Manager) sharedDaemonHeldByOther(uid, id string) bool {
	for ouid, o := range m.cp.Claims {
		if ouid != uid && slices.Contains(sharedDaemonIDs(o), id) {
			return true
		}
	}
	return false
}

// restoreIntervals gives the GPUs on which c holds an interval the default
// back, unless another claim still holds one there.
func (m *Manager) restoreIntervals(ctx context.Context, c *checkpoint.Claim) error {
	for _, gpu := range heldIntervalGPUs(c) {
		if m.intervalHeldByOther(c.UID, gpu) {
			continue
		}
		if err := m.cfg.Backend.SetTimeSlice(ctx, gpu, backend.TimeSliceDefault); err != nil {
			return withKind(ErrSharing, fmt.Errorf("restore default time-slice interval of GPU %s: %w", gpu, err))
		}
		klog.FromContext(ctx).V(2).Info("Restored default time-slice interval", "gpu", gpu)
	}
	return nil
}

func heldIntervalGPUs(c *checkpoint.Claim) []string {
	var out []string
	for _, d := range c.Devices {
		if _, ok := d.Sharing.Interval(); ok && !slices.Contains(out, d.GPUUUID) {
			out = append(out, d.GPUUUID)
		}
	}
	return out
}

func (m *Manager) intervalHeldByOther(uid, gpu string) bool {
	for ouid, o := range m.cp.Claims {
		if ouid != uid && slices.Contains(heldIntervalGPUs(o), gpu) {
			return true
		}
	}
	return false
}

// ensureSharing makes the node match what prepared claims recorded: their
// MPS daemons (their own and the shared daemons of their shares) running,
// adopted after an agent restart, started again when one died. At start it
// also sets their time slices (a reboot resets them; nothing else does)
// and stops daemons no claim holds (only a crash leaves those: an
// unprepare that cannot stop its daemon keeps its entry and is retried),
// which needs a scan of /proc the periodic check does without. It returns
// how many daemons had to be started again.
func (m *Manager) ensureSharing(ctx context.Context, atStart bool) (restarted int, err error) {
	logger := klog.FromContext(ctx)
	var errs []error
	want := map[string]bool{}
	for _, c := range sortedClaims(m.cp) {
		want[c.UID] = true
		for _, id := range sharedDaemonIDs(c) {
			want[id] = true
		}
		if c.State != checkpoint.PrepareCompleted {
			continue
		}
		for _, d := range c.Devices {
			if ts, ok := d.Sharing.Interval(); ok && atStart {
				if err := m.cfg.Backend.SetTimeSlice(ctx, d.GPUUUID, ts); err != nil {
					errs = append(errs, fmt.Errorf("claim %s/%s: set time-slice interval of GPU %s: %w", c.Namespace, c.Name, d.GPUUUID, err))
				}
			}
		}
		if usesMPS(c) {
			_, n, err := m.startRecordedDaemons(ctx, c)
			if err != nil {
				errs = append(errs, fmt.Errorf("claim %s/%s: %w", c.Namespace, c.Name, err))
				continue
			}
			if n > 0 {
				restarted += n
				logger.Info("MPS daemon of a prepared claim was not running; started it again", "claim", klog.KRef(c.Namespace, c.Name), "daemons", n)
			}
		}
	}
	if atStart {
		daemons, err := m.cfg.Backend.MPSDaemons(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("list MPS daemons: %w", err))
		}
		for _, d := range daemons {
			if want[d.ID] {
				continue
			}
			logger.Info("Stopping MPS daemon no claim holds", "id", d.ID, "running", d.Running)
			if err := m.cfg.Backend.StopMPS(ctx, d.ID); err != nil {
				errs = append(errs, fmt.Errorf("stop MPS daemon %s no claim holds: %w", d.ID, err))
			}
		}
	}
	if restarted > 0 && m.cfg.MPSRestarted != nil {
		m.cfg.MPSRestarted(restarted)
	}
	return restarted, withKind(ErrSharing, errors.Join(errs...))
}

// startRecordedDaemons starts or adopts the daemons of a prepared claim and
// returns its devices with their pipe directories, and how many daemons
// had to be started (a shared daemon another claim already restarted in
// this pass counts once, there).
func (m *Manager) startRecordedDaemons(ctx context.Context, c *checkpoint.Claim) ([]cdi.ClaimDevice, int, error) {
	devs, err := m.resolveRecorded(c)
	if err != nil {
		return nil, 0, err
	}
	n, err := m.startDaemons(ctx, c.UID, devs)
	return devs, n, err
}

// EnsureSharing is ensureSharing of the daemons under the manager's lock,
// for the agent's periodic check that prepared claims' MPS daemons are
// alive.
func (m *Manager) EnsureSharing(ctx context.Context) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ensureSharing(ctx, false)
}

// SharingCounts returns how many prepared claims use each strategy ("" for
// claims without sharing settings) and how many MPS daemons they hold.
func (m *Manager) SharingCounts() (byStrategy map[string]int, daemons int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	byStrategy = map[string]int{}
	shared := map[string]bool{}
	for _, c := range m.cp.Claims {
		if c.State != checkpoint.PrepareCompleted {
			continue
		}
		var strategies []string
		for _, d := range c.Devices {
			s := ""
			if d.Sharing != nil {
				s = string(d.Sharing.Strategy)
			}
			if !slices.Contains(strategies, s) {
				strategies = append(strategies, s)
			}
		}
		for _, s := range strategies {
			byStrategy[s]++
		}
		if slices.ContainsFunc(c.Devices, func(d checkpoint.Device) bool { return d.Sharing.ClaimDaemon() }) {
			daemons++
		}
		for _, id := range sharedDaemonIDs(c) {
			shared[id] = true
		}
	}
	return byStrategy, daemons + len(shared)
}

func sortedClaims(cp *checkpoint.Checkpoint) []*checkpoint.Claim {
	out := make([]*checkpoint.Claim, 0, len(cp.Claims))
	for _, c := range cp.Claims {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out
}
