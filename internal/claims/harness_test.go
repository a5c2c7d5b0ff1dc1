package claims

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/cdi"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
	"github.com/tessera-gpu/tessera/internal/sim/standin/standintest"
)

const (
	driverName = "gpu.tessera.dev"
	nodeName   = "node-1"
)

// env is one node's on-disk world: sim state, CDI dir and checkpoint. A new
// Manager over the same env is what a restarted agent sees.
type env struct {
	t       testing.TB
	dir     string
	profile string
	bootID  string
	// partitioning is the node's publishing mode (static when empty).
	partitioning publish.Partitioning
	// sharing is the node's --sharing (none when empty).
	sharing publish.Sharing
	// wrap, if set, wraps the backend (fault injection).
	wrap func(backend.Backend) backend.Backend
	// sim is the simulated backend of the last start.
	sim *sim.Backend
	// orphanHook is Config.OrphanDestroyed.
	orphanHook func()
	// mps gives the simulator MPS daemons: the stand-in control program,
	// played by this test binary (TestMain).
	mps bool
	// mpsRestarted is Config.MPSRestarted.
	mpsRestarted func(int)
	// vendorSpecDirs is the CDI writer's VendorSpecDirs (none when empty).
	vendorSpecDirs []string
	// getClaim is Config.GetClaim (unset: none), released is
	// Config.Released.
	getClaim func(ctx context.Context, namespace, name string) (*resourceapi.ResourceClaim, error)
	released func(Evidence, string, ClaimRef)
	// releaseLimits is Config.MemoryLimits.Release (unset: no hook).
	releaseLimits func(claimUID string) error
	// imex is Config.IMEX (unset: none).
	imex *IMEX
	// clock, if set, is the simulator's clock and Config.ModeClock: a
	// test steps it through a partition mode change (modes_test.go).
	clock *testingclock.FakeClock
	// machine, if set, edits the machine before the simulator starts.
	machine func(*sim.Machine)
	// passthrough is Config.Passthrough.
	passthrough bool
}

// TestMain lets the test binary be the MPS control stand-in (standintest).
func TestMain(m *testing.M) { standintest.Main(m) }

func (e *env) mpsRoot() string { return filepath.Join(e.dir, "mps") }

func newEnv(t testing.TB, profile string) *env {
	return &env{t: t, dir: t.TempDir(), profile: profile, bootID: "boot-1"}
}

func (e *env) cdiDir() string         { return filepath.Join(e.dir, "cdi") }
func (e *env) checkpointPath() string { return filepath.Join(e.dir, "plugin", "checkpoint.json") }

// corruptCheckpoint writes data over both of the checkpoint's files (the
// store falls back to the other file when only one is bad).
func (e *env) corruptCheckpoint(data string) {
	e.t.Helper()
	for _, p := range []string{e.checkpointPath(), e.checkpointPath() + ".1"} {
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			e.t.Fatal(err)
		}
	}
}

// start builds a Manager as the agent does on start, with an optional crash hook.
func (e *env) start(crash func(crashStep) error) (*Manager, *publish.Result) {
	e.t.Helper()
	_, ctx := ktesting.NewTestContext(e.t)
	m, err := sim.Profile(e.profile, nodeName)
	if err != nil {
		e.t.Fatal(err)
	}
	if e.machine != nil {
		e.machine(m)
	}
	opts := []sim.Option{sim.WithBootID(e.bootID)}
	if e.clock != nil {
		opts = append(opts, sim.WithClock(e.clock))
	}
	if e.mps {
		opts = append(opts, sim.WithMPS(e.mpsRoot(), standintest.Control(e.t)))
		e.t.Cleanup(e.stopDaemons)
	}
	b, err := sim.New(m, filepath.Join(e.dir, "sim"), opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.sim = b
	var be backend.Backend = b
	if e.wrap != nil {
		be = e.wrap(b)
	}
	pubOpts := publish.Options{Partitioning: e.partitioning, Sharing: e.sharing}
	// Like the agent, which republishes when the backend's generation
	// changes, the manager sees the node as it is now: the GPUs passed
	// through (as the manager records them, which the node's sysfs shows)
	// keep their names and publish no device.
	// Built again only when the backend's generation moved, as the agent
	// republishes: a carve, a destroy, a binding.
	var last *publish.Result
	var lastGen string
	devices := func() *publish.Result {
		gen, err := b.Generation()
		if err != nil {
			e.t.Fatal(err)
		}
		if last != nil && gen == lastGen {
			return last
		}
		inv, err := b.Discover(ctx)
		if err != nil {
			e.t.Fatal(err)
		}
		opts := pubOpts
		opts.Passed = simPassed(e.t, b)
		r, err := publish.Build(nodeName, inv, opts)
		if err != nil {
			e.t.Fatal(err)
		}
		last, lastGen = r, gen
		return r
	}
	res := devices()
	w, err := cdi.NewWriter(cdi.Options{SpecDir: e.cdiDir(), DevRoot: b.DevRoot(), DeviceNumbers: b.DeviceNumbers, VendorSpecDirs: e.vendorSpecDirs})
	if err != nil {
		e.t.Fatal(err)
	}
	cfg := Config{
		DriverName: driverName, Backend: be, CDI: w,
		Store: checkpoint.NewStore(e.checkpointPath()), BootID: e.bootID,
		Devices: devices, Partitioning: e.partitioning, OrphanDestroyed: e.orphanHook,
		MPSRestarted: e.mpsRestarted, GetClaim: e.getClaim, Released: e.released,
		IMEX: e.imex, VFIO: b.PCISysfs(), Passthrough: e.passthrough,
	}
	if e.clock != nil {
		cfg.ModeClock = e.clock
	}
	if e.releaseLimits != nil {
		cfg.MemoryLimits = &MemoryLimits{Release: e.releaseLimits}
	}
	mgr, err := newManager(ctx, cfg, crash)
	if err != nil {
		e.t.Fatalf("start manager: %v", err)
	}
	return mgr, res
}

func (e *env) specFiles() []string {
	e.t.Helper()
	m, err := filepath.Glob(filepath.Join(e.cdiDir(), "*.json"))
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

func (e *env) hasSpec(uid string) bool {
	_, err := os.Stat(filepath.Join(e.cdiDir(), "k8s.gpu.tessera.dev-claim_"+uid+".json"))
	return err == nil
}

// allocated builds a claim allocated the given devices of this node's pool.
func allocated(name string, devices ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)}}
	c.Status.Allocation = &resourceapi.AllocationResult{}
	for _, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: "gpu", Driver: driverName, Pool: nodeName, Device: d,
		})
	}
	return c
}

func ctxFor(t testing.TB) context.Context { _, ctx := ktesting.NewTestContext(t); return ctx }
