package claims

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/klog/v2"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/tessera-gpu/tessera/internal/cdi"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/mps"
)

// mpsDaemons is the MPS daemon effect: a claim's devices under an MPS
// config run under the claim's own daemon, and each enforced capacity
// share under its device's shared daemon (capacity.go). The daemon starts
// after any carve (it serves the partition's UUID) and tells each device
// where its pipes are (the CDI spec mounts them); rollback stops it, found
// by its ID whether or not its start was finished, before the partitions
// it serves go. A daemon that died is started again by the periodic check,
// and at start those no claim holds are stopped.
type mpsDaemons struct{ nothing }

func (mpsDaemons) plan(_ *Manager, d *planned, _ *checkpoint.Device) bool {
	return d.dev.Sharing.IsMPS()
}

func (mpsDaemons) holds(d checkpoint.Device) bool { return d.Sharing.IsMPS() }

func (mpsDaemons) apply(ctx context.Context, m *Manager, entry *checkpoint.Claim, devs []planned) error {
	cds := cdiDevices(devs)
	if _, err := m.startDaemons(ctx, entry.UID, cds); err != nil {
		return err
	}
	for i := range devs {
		devs[i].dev.MPSPipeDir = cds[i].MPSPipeDir
	}
	return nil
}

func (mpsDaemons) undo(ctx context.Context, m *Manager, c *checkpoint.Claim) error {
	return m.stopDaemons(ctx, c)
}

// ensure starts or adopts the daemons of a prepared claim, filling in its
// devices' pipe directories; a shared daemon another claim already
// restarted in this pass counts once, there.
func (mpsDaemons) ensure(ctx context.Context, m *Manager, r *recorded, occ occasion) (int, error) {
	if !usesMPS(r.c) {
		return 0, nil
	}
	devs, err := r.devices(m)
	if err != nil {
		return 0, err
	}
	n, err := m.startDaemons(ctx, r.c.UID, devs)
	if err != nil {
		return 0, err
	}
	if n > 0 && occ != onPrepare {
		klog.FromContext(ctx).Info("MPS daemon of a prepared claim was not running; started it again", "claim", klog.KRef(r.c.Namespace, r.c.Name), "daemons", n)
	}
	return n, nil
}

// sweep stops, at start, the daemons no claim holds: only a crash leaves
// those (an unprepare that cannot stop its daemon keeps its entry and is
// retried). It needs a scan of /proc, which the periodic check does
// without.
func (mpsDaemons) sweep(ctx context.Context, m *Manager, occ occasion) (int, error) {
	if occ != atStart {
		return 0, nil
	}
	logger := klog.FromContext(ctx)
	want := map[string]bool{}
	for _, c := range m.cp.Claims {
		want[c.UID] = true
		for _, id := range sharedDaemonIDs(c) {
			want[id] = true
		}
	}
	daemons, err := m.cfg.Backend.MPSDaemons(ctx)
	if err != nil {
		logger.Error(err, "List MPS daemons")
	}
	for _, d := range daemons {
		if want[d.ID] {
			continue
		}
		logger.Info("Stopping MPS daemon no claim holds", "id", d.ID, "running", d.Running)
		if err := m.cfg.Backend.StopMPS(ctx, d.ID); err != nil {
			logger.Error(err, "Stop MPS daemon no claim holds", "id", d.ID)
		}
	}
	return 0, nil
}

// daemonSpecs returns the MPS daemons a claim's devices run under: the
// claim's own (devices it has to itself with an MPS config) and the shared
// daemon of each device it holds an enforced capacity share of. of[i] is
// device i's daemon in specs, -1 for none.
func daemonSpecs(uid string, devs []cdi.ClaimDevice) (specs []mps.DaemonSpec, of []int) {
	of = make([]int, len(devs))
	own := -1
	for i, d := range devs {
		of[i] = -1
		s := d.Sharing
		u := deviceUUID(d)
		switch {
		case s.SharedDaemon():
			id := sharedDaemonID(u)
			j := slices.IndexFunc(specs, func(sp mps.DaemonSpec) bool { return sp.ID == id })
			if j < 0 {
				// No defaults: each share's limits are its clients' (CDI env).
				specs = append(specs, mps.DaemonSpec{ID: id, Devices: []string{u}})
				j = len(specs) - 1
			}
			of[i] = j
		case s.ClaimDaemon():
			if own < 0 {
				specs = append(specs, mps.DaemonSpec{ID: uid, ActiveThreadPercentage: s.MPSActiveThreadPercentage, PinnedMemoryLimits: map[string]int64{}})
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
// each MPS device's MPSPipeDir: the directory its containers mount. Under
// MPS v3 that is a namespace's, never the daemon's whole pipe directory:
// each share gets a namespace of its own in the device's shared daemon
// (shareNamespace, created here), and a claim's own daemon serves it in
// the server's default namespace. It returns how many daemons were started
// rather than adopted.
func (m *Manager) startDaemons(ctx context.Context, uid string, devs []cdi.ClaimDevice) (started int, err error) {
	specs, of := daemonSpecs(uid, devs)
	daemons := make([]*mps.Daemon, len(specs))
	for i, spec := range specs {
		d, err := m.cfg.Backend.StartMPS(ctx, spec)
		if err != nil {
			return started, withKind(ErrSharing, fmt.Errorf("start MPS daemon %s: %w", spec.ID, err))
		}
		if !d.Adopted {
			started++
		}
		daemons[i] = d
		klog.FromContext(ctx).V(2).Info("MPS daemon running", "id", spec.ID, "devices", spec.Devices, "pipeDir", d.PipeDir, "pid", d.PID, "adopted", d.Adopted, "namespaces", d.Namespaces)
	}
	for i := range devs {
		if of[i] < 0 {
			continue
		}
		d := daemons[of[i]]
		if !d.Namespaces || !devs[i].Sharing.SharedDaemon() {
			devs[i].MPSPipeDir = d.ClientDir
			continue
		}
		dir, err := m.cfg.Backend.EnsureMPSNamespace(ctx, d.ID, shareNamespace(devs[i]))
		if err != nil {
			return started, withKind(ErrSharing, fmt.Errorf("device %s/%s: MPS namespace of its share: %w", devs[i].Pool, devs[i].Device, err))
		}
		devs[i].MPSPipeDir = dir
	}
	return started, nil
}

// shareNamespace is the MPS v3 namespace of a capacity share: named by its
// ShareID, which is unique on the device, with the share's limits, so the
// daemon's server holds them whatever the container's environment says.
func shareNamespace(d cdi.ClaimDevice) mps.NamespaceSpec {
	return mps.NamespaceSpec{
		Name:                   d.ShareID,
		ActiveThreadPercentage: d.Sharing.MPSActiveThreadPercentage,
		PinnedMemoryLimit:      d.Sharing.MPSPinnedMemoryLimit,
	}
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
			// The others keep the daemon; this claim's namespaces go
			// (legacy MPS has none: nothing to do).
			for _, d := range c.Devices {
				if d.Sharing.SharedDaemon() && sharedDaemonID(checkpointUUID(d)) == id && d.ShareID != "" {
					if err := m.cfg.Backend.DeleteMPSNamespace(ctx, id, d.ShareID); err != nil {
						errs = append(errs, fmt.Errorf("delete MPS namespace %s of shared daemon %s: %w", d.ShareID, id, err))
					}
				}
			}
			continue
		}
		if err := m.cfg.Backend.StopMPS(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("stop shared MPS daemon %s: %w", id, err))
		}
	}
	return withKind(ErrSharing, errors.Join(errs...))
}

// checkpointUUID is what CUDA calls a recorded device.
func checkpointUUID(d checkpoint.Device) string {
	if d.PartitionUUID != "" {
		return d.PartitionUUID
	}
	return d.GPUUUID
}

// sharedDaemonIDs are the shared daemons c's shares run under.
func sharedDaemonIDs(c *checkpoint.Claim) []string {
	var out []string
	for _, d := range c.Devices {
		if !d.Sharing.SharedDaemon() {
			continue
		}
		if id := sharedDaemonID(checkpointUUID(d)); !slices.Contains(out, id) {
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

// edits adds the claim-level device of the claim's MPS clients: every
// container using one of its MPS devices mounts the daemon's pipe
// directory and gets the CUDA_MPS_* variables (mps.ClientEdits).
func (mpsDaemons) edits(_ *Manager, s *claimSpec) error {
	s.Shared = append(s.Shared, cdi.ClaimLevel{
		Name:  "mps",
		Joins: func(d *cdi.ClaimDevice) bool { return d.Sharing.IsMPS() },
		Edits: mpsClientEdits,
	})
	return nil
}

func mpsClientEdits(devs []cdi.ClaimDevice) (cdi.Edits, error) {
	clients := make([]mps.Client, len(devs))
	for i := range devs {
		d := &devs[i]
		clients[i] = mps.Client{Name: d.Name(), PipeDir: d.MPSPipeDir, UUID: d.UUID(),
			PinnedMemoryLimit: d.Sharing.MPSPinnedMemoryLimit, ActiveThreadPercentage: d.Sharing.MPSActiveThreadPercentage}
	}
	env, mount, err := mps.ClientEdits(clients)
	if err != nil {
		return cdi.Edits{}, err
	}
	return cdi.Edits{Env: env, Mounts: []*cdispec.Mount{mount}}, nil
}
