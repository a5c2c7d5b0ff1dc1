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
		sd := sharing.Device{Request: d.dev.Request, Name: d.dev.Device, Vendor: d.dev.GPU.Vendor, MemoryBytes: d.dev.GPU.MemoryBytes}
		switch {
		case d.carve != nil:
			sd.Partition = true
			sd.MemoryBytes = profileMemory(d)
		case d.dev.Partition != nil:
			sd.Partition = true
			sd.MemoryBytes = d.dev.Partition.MemoryBytes
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
// claim's MPS daemon, telling each MPS device where its pipes are.
func (m *Manager) applySharing(ctx context.Context, uid string, devs []planned) error {
	for _, d := range devs {
		if ts, ok := d.dev.Sharing.Interval(); ok {
			if err := m.cfg.Backend.SetTimeSlice(ctx, d.dev.GPU.UUID, ts); err != nil {
				return withKind(ErrSharing, fmt.Errorf("device %s: set time-slice interval %s: %w", d.dev.Device, ts, err))
			}
		}
	}
	spec := mpsSpec(uid, devs)
	if spec == nil {
		return nil
	}
	daemon, err := m.cfg.Backend.StartMPS(ctx, *spec)
	if err != nil {
		return withKind(ErrSharing, fmt.Errorf("start MPS daemon: %w", err))
	}
	for i := range devs {
		if devs[i].dev.Sharing.IsMPS() {
			devs[i].dev.MPSPipeDir = daemon.PipeDir
		}
	}
	klog.FromContext(ctx).V(2).Info("MPS daemon running", "devices", spec.Devices, "pipeDir", daemon.PipeDir, "pid", daemon.PID, "adopted", daemon.Adopted)
	return nil
}

// mpsSpec is the claim's MPS daemon, nil when no device is under MPS.
func mpsSpec(uid string, devs []planned) *backend.MPSDaemonSpec {
	var spec *backend.MPSDaemonSpec
	for _, d := range devs {
		s := d.dev.Sharing
		if !s.IsMPS() {
			continue
		}
		if spec == nil {
			spec = &backend.MPSDaemonSpec{ID: uid, ActiveThreadPercentage: s.MPSActiveThreadPercentage, PinnedMemoryLimits: map[string]int64{}}
		}
		u := d.dev.GPU.UUID
		if d.dev.Partition != nil {
			u = d.dev.Partition.UUID
		}
		spec.Devices = append(spec.Devices, u)
		if s.MPSPinnedMemoryLimit > 0 {
			spec.PinnedMemoryLimits[u] = s.MPSPinnedMemoryLimit
		}
	}
	return spec
}

func usesMPS(c *checkpoint.Claim) bool {
	return slices.ContainsFunc(c.Devices, func(d checkpoint.Device) bool { return d.Sharing.IsMPS() })
}

// stopDaemon stops c's MPS daemon, if c has one.
func (m *Manager) stopDaemon(ctx context.Context, c *checkpoint.Claim) error {
	if !usesMPS(c) {
		return nil
	}
	if err := m.cfg.Backend.StopMPS(ctx, c.UID); err != nil {
		return withKind(ErrSharing, fmt.Errorf("stop MPS daemon: %w", err))
	}
	return nil
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
// MPS daemons running (adopted after an agent restart, started again when
// one died). At start it also sets their time slices (a reboot resets them;
// nothing else does) and stops daemons no claim holds (only a crash leaves
// those: an unprepare that cannot stop its daemon keeps its entry and is
// retried), which needs a scan of /proc the periodic check does without.
// It returns how many daemons had to be started again.
func (m *Manager) ensureSharing(ctx context.Context, atStart bool) (restarted int, err error) {
	logger := klog.FromContext(ctx)
	var errs []error
	want := map[string]bool{}
	for _, c := range sortedClaims(m.cp) {
		want[c.UID] = true
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
			d, err := m.startRecordedDaemon(ctx, c)
			if err != nil {
				errs = append(errs, fmt.Errorf("claim %s/%s: %w", c.Namespace, c.Name, err))
				continue
			}
			if !d.Adopted {
				restarted++
				logger.Info("MPS daemon of a prepared claim was not running; started it again", "claim", klog.KRef(c.Namespace, c.Name), "pid", d.PID)
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

// startRecordedDaemon starts or adopts the daemon of a prepared claim.
func (m *Manager) startRecordedDaemon(ctx context.Context, c *checkpoint.Claim) (*backend.MPSDaemon, error) {
	devs, err := m.resolveRecorded(c)
	if err != nil {
		return nil, err
	}
	ps := make([]planned, len(devs))
	for i := range devs {
		ps[i].dev = devs[i]
	}
	d, err := m.cfg.Backend.StartMPS(ctx, *mpsSpec(c.UID, ps))
	if err != nil {
		return nil, withKind(ErrSharing, fmt.Errorf("start MPS daemon: %w", err))
	}
	return d, nil
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
		if usesMPS(c) {
			daemons++
		}
	}
	return byStrategy, daemons
}

func sortedClaims(cp *checkpoint.Checkpoint) []*checkpoint.Claim {
	out := make([]*checkpoint.Claim, 0, len(cp.Claims))
	for _, c := range cp.Claims {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out
}
