package claims

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/mps"
	"github.com/tessera-gpu/tessera/internal/publish"
)

type claimT = resourceapi.ResourceClaim

var updateTraces = flag.Bool("update-traces", false, "rewrite testdata/trace/*.txt from this run")

// tracer is a backend that writes down, in order, every call the manager
// makes that changes the node (or asks about it), every named step it
// reaches and every checkpoint write it made in between, so a trace pins
// the order of the side effects' actions and of the writes that make them
// crash-safe.
type tracer struct {
	backend.Backend
	log  *[]string
	path string // the checkpoint
	last *string
}

func (t *tracer) note(format string, args ...any) {
	t.sawCheckpoint()
	*t.log = append(*t.log, fmt.Sprintf(format, args...))
}

// sawCheckpoint notes the checkpoint when it changed since the last note.
func (t *tracer) sawCheckpoint() {
	cp, err := checkpoint.Read(t.path)
	s := "unreadable"
	if err == nil {
		s = summary(cp)
	}
	if s != *t.last {
		*t.last = s
		*t.log = append(*t.log, "  checkpoint "+s)
	}
}

// summary is what a checkpoint says about claims and partition mode,
// without times and generated names.
func summary(cp *checkpoint.Checkpoint) string {
	var parts []string
	uids := make([]string, 0, len(cp.Claims))
	for uid := range cp.Claims {
		uids = append(uids, uid)
	}
	sort.Strings(uids)
	for _, uid := range uids {
		c := cp.Claims[uid]
		var devs []string
		for _, d := range c.Devices {
			s := d.Device
			if d.Placement != nil {
				s += fmt.Sprintf(" at %s@%d", d.Profile, d.Placement.Start)
			}
			if d.PartitionUUID != "" {
				s += " part"
			}
			if d.CreatedPartition {
				s += " created"
			}
			if d.Sharing != nil && d.Sharing.Strategy != "" {
				s += " " + string(d.Sharing.Strategy)
			}
			if len(d.CDIDeviceIDs) > 0 {
				s += " ids"
			}
			devs = append(devs, s)
		}
		u := ""
		if c.Unconfirmed {
			u = " unconfirmed"
		}
		parts = append(parts, fmt.Sprintf("%s=%s%s[%s]", uid, c.State, u, strings.Join(devs, ", ")))
	}
	return fmt.Sprintf("{%s} modeOn=%v", strings.Join(parts, " "), cp.PartitionModeOn)
}

func (t *tracer) Discover(ctx context.Context) (*inventory.Node, error) {
	t.note("Discover")
	return t.Backend.Discover(ctx)
}

func (t *tracer) CreatePartition(ctx context.Context, gpu, profile string, at inventory.Placement) (*inventory.Partition, error) {
	t.note("CreatePartition %s %s@%d", gpu, profile, at.Start)
	return t.Backend.CreatePartition(ctx, gpu, profile, at)
}

func (t *tracer) DestroyPartition(ctx context.Context, gpu, partition string) error {
	t.note("DestroyPartition %s", gpu)
	return t.Backend.DestroyPartition(ctx, gpu, partition)
}

func (t *tracer) SetPartitionMode(ctx context.Context, gpu string, on bool) error {
	t.note("SetPartitionMode %s %s", gpu, onOff(on))
	return t.Backend.SetPartitionMode(ctx, gpu, on)
}

func (t *tracer) SetTimeSlice(ctx context.Context, gpu string, ts backend.TimeSlice) error {
	t.note("SetTimeSlice %s %v", gpu, ts)
	return t.Backend.SetTimeSlice(ctx, gpu, ts)
}

func (t *tracer) StartMPS(ctx context.Context, spec mps.DaemonSpec) (*mps.Daemon, error) {
	d, err := t.Backend.StartMPS(ctx, spec)
	adopted := err == nil && d.Adopted
	t.note("StartMPS %s devices=%d adopted=%v", traceID(spec.ID), len(spec.Devices), adopted)
	return d, err
}

func (t *tracer) StopMPS(ctx context.Context, id string) error {
	t.note("StopMPS %s", traceID(id))
	return t.Backend.StopMPS(ctx, id)
}

func (t *tracer) MPSDaemons(ctx context.Context) ([]mps.DaemonState, error) {
	t.note("MPSDaemons")
	return t.Backend.MPSDaemons(ctx)
}

func (t *tracer) DestroyStray(ctx context.Context, gpu string) (int, error) {
	t.note("DestroyStray %s", gpu)
	if sc, ok := t.Backend.(backend.StrayCleaner); ok {
		return sc.DestroyStray(ctx, gpu)
	}
	return 0, nil
}

// traceID keeps a shared daemon's ID short: its device's UUID is generated.
func traceID(id string) string {
	if strings.HasPrefix(id, "share-MIG-") {
		return "share-MIG"
	}
	return id
}

// traceEnv is env whose backend and crash hook write to one log.
type traceEnv struct {
	*env
	log  []string
	last string
}

func newTraceEnv(t *testing.T, e *env) *traceEnv {
	te := &traceEnv{env: e}
	inner := e.wrap
	e.wrap = func(b backend.Backend) backend.Backend {
		if inner != nil {
			b = inner(b)
		}
		return &tracer{Backend: b, log: &te.log, path: e.checkpointPath(), last: &te.last}
	}
	return te
}

func (te *traceEnv) tracer() *tracer {
	return &tracer{log: &te.log, path: te.checkpointPath(), last: &te.last}
}

func (te *traceEnv) note(format string, args ...any) { te.tracer().note(format, args...) }

// start starts a manager that logs its steps and stops at stop ("" for none).
func (te *traceEnv) start(stop crashStep) *Manager {
	te.note("start")
	m, _ := te.env.start(te.hook(stop))
	te.note("started")
	return m
}

func (te *traceEnv) hook(stop crashStep) func(crashStep) error {
	return func(s crashStep) error {
		te.note("step %s", s)
		if s == stop {
			return errInjected
		}
		return nil
	}
}

func (te *traceEnv) prepare(m *Manager, name string, devices ...string) {
	te.prepareClaim(m, allocated(name, devices...))
}

func (te *traceEnv) prepareClaim(m *Manager, c *claimT) {
	te.note("Prepare %s", c.Name)
	_, err := m.Prepare(ctxFor(te.t), c)
	te.note("  -> %s", errText(err))
}

func (te *traceEnv) unprepare(m *Manager, name string) {
	te.note("Unprepare %s", name)
	err := m.Unprepare(ctxFor(te.t), "uid-"+name, "default", name)
	te.note("  -> %s", errText(err))
}

func errText(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, errInjected):
		return "stopped"
	}
	return "error: " + err.Error()
}

// TestTrace pins, for a claim of each side effect and their mixes, the
// order of backend calls, named steps and checkpoint writes of prepare,
// unprepare, a crash at every step and the recovery that follows, and the
// periodic checks. testdata/trace holds what the manager did; a change of
// that order is a change of behaviour, to be made on purpose
// (-update-traces).
func TestTrace(t *testing.T) {
	type op func(te *traceEnv, m *Manager)
	prepareSteps := []crashStep{stepPrepareStarted, stepPartitionCarved, stepSharingApplied, stepSpecWritten, stepPrepareCompleted}
	unprepareSteps := []crashStep{stepUnprepareStarted, stepSpecRemoved, stepUnprepareFinished}
	// crashes runs prepare (then unprepare) of claim, stopping at every
	// step, each followed by a restart and the kubelet's retry.
	crashes := func(te *traceEnv, claim func() *claimT) {
		for _, s := range prepareSteps {
			te.note("== crash at prepare %s", s)
			m := te.start(s)
			te.prepareClaim(m, claim())
			m = te.start("")
			te.prepareClaim(m, claim())
			te.unprepare(m, claim().Name)
		}
		for _, s := range unprepareSteps {
			te.note("== crash at unprepare %s", s)
			m := te.start("")
			te.prepareClaim(m, claim())
			m.crashHook = te.hook(s)
			te.unprepare(m, claim().Name)
			m = te.start("")
			te.unprepare(m, claim().Name)
		}
	}
	cases := []struct {
		name  string
		env   func(t *testing.T) *env
		steps op
	}{
		{"plain", func(t *testing.T) *env { return newEnv(t, "dgx-h100") }, func(te *traceEnv, m *Manager) {
			crashes(te, func() *claimT { return allocated("p", "gpu-2") })
		}},
		{"carve", func(t *testing.T) *env { return dynamicEnv(t, "dgx-h100") }, func(te *traceEnv, m *Manager) {
			// Two GPUs' placements and a whole GPU: MIG mode on for the
			// first two, off for the third, interleaved with the carves.
			te.prepare(m, "mix", "gpu-7-mig-1g-10gb-6", "gpu-6-mig-2g-20gb-4", "gpu-7-mig-3g-40gb-0")
			te.prepare(m, "whole", "gpu-5")
			te.unprepare(m, "mix")
			te.unprepare(m, "whole")
			crashes(te, func() *claimT { return allocated("x", "gpu-7-mig-1g-10gb-6", "gpu-6-mig-2g-20gb-4") })
		}},
		{"reboot", func(t *testing.T) *env { return dynamicEnv(t, "dgx-h100") }, func(te *traceEnv, m *Manager) {
			te.prepare(m, "x", "gpu-7-mig-1g-10gb-6")
			te.bootID = "boot-2"
			te.sim = nil
			m = te.start("")
			te.prepare(m, "x", "gpu-7-mig-1g-10gb-6")
			te.note("SweepOrphans")
			n, err := m.SweepOrphans(ctxFor(te.t))
			te.note("  -> %d %s", n, errText(err))
			te.unprepare(m, "x")
		}},
		{"mode", func(t *testing.T) *env { return dynamicEnv(t, "dgx-h100-mig") }, func(te *traceEnv, m *Manager) {
			te.prepare(m, "whole", "gpu-5")
			te.prepare(m, "mix", "gpu-7-mig-1g-10gb-6", "gpu-6")
			te.unprepare(m, "mix")
			te.unprepare(m, "whole")
		}},
		{"carve-fails", func(t *testing.T) *env {
			e := dynamicEnv(t, "dgx-h100")
			e.wrap = func(b backend.Backend) backend.Backend { return &faulty{Backend: b, fail: "create-second"} }
			return e
		}, func(te *traceEnv, m *Manager) {
			te.prepare(m, "x", "gpu-7-mig-1g-10gb-6", "gpu-6-mig-2g-20gb-4")
		}},
		{"interval-and-mps", func(t *testing.T) *env { return sharingEnv(t, "mixed-inference") }, func(te *traceEnv, m *Manager) {
			// A claim's devices are all under MPS or none: two claims.
			te.prepareClaim(m, configured("a", mpsHalf, "gpu-0"))
			te.prepareClaim(m, configured("b", longSlice, "gpu-2"))
			m = te.start("")
			te.unprepare(m, "a")
			te.unprepare(m, "b")
		}},
		{"interval", func(t *testing.T) *env { return sharingEnv(t, "mixed-inference") }, func(te *traceEnv, m *Manager) {
			te.prepareClaim(m, configured("a", longSlice, "gpu-2"))
			te.prepareClaim(m, configured("b", longSlice, "gpu-3"))
			m = te.start("")
			te.unprepare(m, "a")
			te.unprepare(m, "b")
			crashes(te, func() *claimT { return configured("c", longSlice, "gpu-2") })
		}},
		{"mps", func(t *testing.T) *env { return sharingEnv(t, "mixed-inference") }, func(te *traceEnv, m *Manager) {
			te.prepareClaim(m, configured("a", mpsHalf, "gpu-0"))
			te.killDaemon("uid-a")
			te.note("EnsureSharing")
			n, err := m.EnsureSharing(ctxFor(te.t))
			te.note("  -> %d %s", n, errText(err))
			te.killDaemon("uid-a")
			te.prepareClaim(m, configured("a", mpsHalf, "gpu-0"))
			m = te.start("")
			te.unprepare(m, "a")
			crashes(te, func() *claimT { return configured("c", mpsHalf, "gpu-0") })
		}},
		{"mps-on-partition", func(t *testing.T) *env {
			e := sharingEnv(t, "dgx-h100")
			e.partitioning = publish.Dynamic
			return e
		}, func(te *traceEnv, m *Manager) {
			slice := func() *claimT {
				c := configured("s", mpsSlice, "gpu-7-mig-1g-10gb-6", "gpu-5")
				c.Status.Allocation.Devices.Config[0].Requests = nil
				return c
			}
			crashes(te, slice)
		}},
		{"shares", func(t *testing.T) *env { return capacityEnv(t, "l4-4") }, func(te *traceEnv, m *Manager) {
			te.prepareClaim(m, shareClaim("a", "gpu-0", "7Gi", 10))
			te.prepareClaim(m, shareClaim("b", "gpu-0", "7Gi", 10))
			m = te.start("")
			te.unprepare(m, "a")
			te.unprepare(m, "b")
			crashes(te, func() *claimT { return shareClaim("c", "gpu-0", "7Gi", 10) })
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			te := newTraceEnv(t, tc.env(t))
			m := te.start("")
			tc.steps(te, m)
			got := strings.Join(te.log, "\n") + "\n"
			path := filepath.Join("testdata", "trace", tc.name+".txt")
			if *updateTraces {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("trace differs from %s (-update-traces rewrites it):\n%s", path, lineDiff(string(want), got))
			}
		})
	}
}

// lineDiff shows the first lines where want and got part.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			end := min(i+8, max(len(w), len(g)))
			var b strings.Builder
			for j := max(0, i-3); j < end; j++ {
				if j < len(w) {
					fmt.Fprintf(&b, "-%4d %s\n", j+1, w[j])
				}
				if j < len(g) {
					fmt.Fprintf(&b, "+%4d %s\n", j+1, g[j])
				}
			}
			return b.String()
		}
	}
	return ""
}
