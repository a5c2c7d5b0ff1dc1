package claims

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim/standin"
)

// On l4-4 (--sharing=capacity): gpu-0..gpu-3 are L4s of 23034Mi and 58 SMs.

func capacityEnv(t *testing.T, profile string) *env {
	e := sharingEnv(t, profile)
	e.sharing = publish.SharingCapacity
	return e
}

// shareClaim is a claim allocated a share of device, as the scheduler
// records it: a ShareID and the capacity consumed.
func shareClaim(name, device, memory string, computeUnits int64) *resourceapi.ResourceClaim {
	c := allocated(name, device)
	id := types.UID("share-id-" + name)
	r := &c.Status.Allocation.Devices.Results[0]
	r.ShareID = &id
	r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{
		"memory":       resource.MustParse(memory),
		"computeUnits": *resource.NewQuantity(computeUnits, resource.DecimalSI),
	}
	return c
}

// sharedDaemon is the backend's view of device uuid's shared MPS daemon.
func (e *env) sharedDaemon(uuid string) (running, known bool) {
	d, ok := e.daemon(sharedDaemonID(uuid))
	return d.Running, ok
}

func TestCapacitySharesSideBySide(t *testing.T) {
	e := capacityEnv(t, "l4-4")
	m, res := e.start(nil)
	ctx := ctxFor(t)
	l4 := res.Devices["gpu-0"].GPU.UUID
	pipes := map[string]bool{}
	for _, name := range []string{"a", "b", "c"} {
		devs, err := m.Prepare(ctx, shareClaim(name, "gpu-0", "7Gi", 0))
		if err != nil {
			t.Fatalf("share %s: %v", name, err)
		}
		if devs[0].ShareID != "share-id-"+name {
			t.Errorf("share %s returned ShareID %q", name, devs[0].ShareID)
		}
		env, mounts := e.containerEdits(devs[0].CDIDeviceIDs)
		for _, want := range []string{"CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=7168M", "CUDA_VISIBLE_DEVICES=" + l4} {
			if !contains(env, want) {
				t.Errorf("share %s: env %v lacks %s", name, env, want)
			}
		}
		for _, v := range env {
			if strings.HasPrefix(v, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=") {
				t.Errorf("memory-only share %s capped: %s", name, v)
			}
		}
		pipes[mounts["/tmp/nvidia-mps"]] = true
		c := m.Prepared()["uid-"+name]
		if d := c.Devices[0]; d.ShareID != "share-id-"+name || !d.Sharing.IsShare() || d.Sharing.Share.MemoryBytes != 7<<30 || !d.Sharing.Share.Enforced {
			t.Errorf("share %s recorded as %+v (sharing %+v)", name, d, d.Sharing)
		}
	}
	if len(pipes) != 1 {
		t.Fatalf("shares of one GPU mount %d pipe directories, want its one daemon's: %v", len(pipes), pipes)
	}
	if running, _ := e.sharedDaemon(l4); !running {
		t.Fatal("shared daemon not running")
	}
	if _, d := m.SharingCounts(); d != 1 {
		t.Errorf("SharingCounts daemons = %d, want 1", d)
	}

	// A fourth does not fit: the scheduler would never do this; the driver
	// refuses rather than over-commit, and leaves nothing behind.
	_, err := m.Prepare(ctx, shareClaim("d", "gpu-0", "7Gi", 0))
	if !errors.Is(err, ErrDeviceInUse) || !strings.Contains(err.Error(), "device gpu-0: share share-id-d (7Gi) with the shares 3 other prepared claims hold consumes 28Gi") {
		t.Fatalf("over-committing share: %v", err)
	}
	if strings.Contains(err.Error(), "default/a") {
		t.Errorf("the refusal names the other claims: %v", err)
	}
	if _, ok := m.Prepared()["uid-d"]; ok || e.hasSpec("uid-d") {
		t.Fatal("refused share left an entry or spec")
	}
	// Nor does a whole-GPU claim on a shared device (its whole memory).
	if _, err := m.Prepare(ctx, shareClaim("whole", "gpu-0", "23034Mi", 0)); !errors.Is(err, ErrDeviceInUse) {
		t.Fatalf("whole GPU beside shares: %v", err)
	}

	// Removing one share leaves the others and their daemon alone.
	if err := m.Unprepare(ctx, "uid-a", "default", "a"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"b", "c"} {
		if c := m.Prepared()["uid-"+name]; c.State != checkpoint.PrepareCompleted || !e.hasSpec("uid-"+name) {
			t.Errorf("share %s after a's unprepare: %+v spec %v", name, c, e.hasSpec("uid-"+name))
		}
	}
	if running, _ := e.sharedDaemon(l4); !running {
		t.Fatal("shared daemon stopped while shares remain")
	}
	// Room again for one.
	if _, err := m.Prepare(ctx, shareClaim("d", "gpu-0", "7Gi", 0)); err != nil {
		t.Fatalf("share after room was freed: %v", err)
	}
	for _, name := range []string{"b", "c", "d"} {
		if err := m.Unprepare(ctx, "uid-"+name, "default", name); err != nil {
			t.Fatal(err)
		}
	}
	if _, known := e.sharedDaemon(l4); known {
		t.Error("shared daemon left after the last share went")
	}
	// The whole GPU is free again, and gets no daemon.
	devs, err := m.Prepare(ctx, shareClaim("whole", "gpu-0", "23034Mi", 0))
	if err != nil {
		t.Fatal(err)
	}
	if env, _ := e.containerEdits(devs[0].CDIDeviceIDs); strings.Contains(strings.Join(env, " "), "CUDA_MPS") {
		t.Errorf("whole-GPU claim on a shared device got MPS: %v", env)
	}
	if d := m.Prepared()["uid-whole"].Devices[0]; d.ShareID != "share-id-whole" || d.Sharing != nil {
		t.Errorf("whole claim recorded %+v", d)
	}
	if _, err := m.Prepare(ctx, shareClaim("late", "gpu-0", "1Gi", 0)); !errors.Is(err, ErrDeviceInUse) {
		t.Fatalf("share beside a whole-GPU claim: %v", err)
	}
}

func TestCapacityComputeShare(t *testing.T) {
	e := capacityEnv(t, "l4-4")
	m, _ := e.start(nil)
	ctx := ctxFor(t)
	for _, name := range []string{"a", "b"} {
		devs, err := m.Prepare(ctx, shareClaim(name, "gpu-1", "2Gi", 29))
		if err != nil {
			t.Fatal(err)
		}
		env, _ := e.containerEdits(devs[0].CDIDeviceIDs)
		if !contains(env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50") || !contains(env, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=2048M") {
			t.Errorf("share %s env %v", name, env)
		}
	}
	_, err := m.Prepare(ctx, shareClaim("c", "gpu-1", "2Gi", 1))
	if !errors.Is(err, ErrDeviceInUse) || !strings.Contains(err.Error(), "59 compute units, more than the device's 23034Mi and 58") {
		t.Fatalf("59th SM: %v", err)
	}
}

func TestCapacityShareOnAMDIsAccountingOnly(t *testing.T) {
	e := capacityEnv(t, "mixed-inference")
	m, _ := e.start(nil)
	ctx := ctxFor(t)
	for _, name := range []string{"a", "b"} {
		devs, err := m.Prepare(ctx, shareClaim(name, "gpu-4", "20Gi", 0))
		if err != nil {
			t.Fatal(err)
		}
		env, _ := e.containerEdits(devs[0].CDIDeviceIDs)
		if strings.Contains(strings.Join(env, " "), "CUDA_MPS") {
			t.Errorf("AMD share got MPS env: %v", env)
		}
		d := m.Prepared()["uid-"+name].Devices[0]
		if !d.Sharing.IsShare() || d.Sharing.Share.Enforced || d.Sharing.IsMPS() {
			t.Errorf("AMD share recorded %+v", d.Sharing)
		}
	}
	if ds, _ := e.sim.MPSDaemons(context.Background()); len(ds) != 0 {
		t.Errorf("daemons for AMD shares: %+v", ds)
	}
}

// TestCapacitySharesCrashAtEveryStep: with two shares prepared on a GPU, a
// third's prepare or the second's unprepare stops at every step; after a
// restart the survivors are prepared, their daemon runs, the stopped one is
// whole or gone, and once all go the daemon goes too.
// TestCapacitySharesCrashAtEveryStep: a crash at any step of a share's
// prepare or unprepare leaves, after a restart, the share prepared once or
// gone, the others untouched and their daemon running; on an R615 node
// (MPS v3) the daemon's namespaces are then exactly the prepared shares'.
func TestCapacitySharesCrashAtEveryStep(t *testing.T) {
	prepareSteps := []crashStep{stepPrepareStarted, stepSharingApplied, stepSpecWritten, stepPrepareCompleted}
	unprepareSteps := []crashStep{stepUnprepareStarted, stepSpecRemoved, stepUnprepareFinished}
	for _, profile := range []string{"l4-4", "l4-4-r615"} {
		for _, step := range append(prepareSteps, unprepareSteps...) {
			t.Run(profile+"/"+string(step), func(t *testing.T) { capacityCrash(t, profile, step, slices.Contains(unprepareSteps, step)) })
		}
	}
}

func capacityCrash(t *testing.T, profile string, step crashStep, unprepare bool) {
	e := capacityEnv(t, profile)
	m, res := e.start(nil)
	ctx := ctxFor(t)
	l4 := res.Devices["gpu-0"].GPU.UUID
	for _, n := range []string{"a", "b"} {
		if _, err := m.Prepare(ctx, shareClaim(n, "gpu-0", "7Gi", 10)); err != nil {
			t.Fatal(err)
		}
	}
	m.crashHook = crashAt(step)
	victim, survivors := "c", []string{"a", "b"}
	var err error
	if unprepare {
		victim, survivors = "b", []string{"a"}
		err = m.Unprepare(ctx, "uid-b", "default", "b")
	} else {
		_, err = m.Prepare(ctx, shareClaim("c", "gpu-0", "7Gi", 10))
	}
	if !errors.Is(err, errInjected) {
		t.Fatalf("%v, want injected stop", err)
	}
	m2, _ := e.start(nil)
	e.assertConsistent(m2, "uid-"+victim)
	for _, n := range survivors {
		if c := m2.Prepared()["uid-"+n]; c.State != checkpoint.PrepareCompleted || !e.hasSpec("uid-"+n) {
			t.Errorf("share %s after restart: %+v", n, c)
		}
	}
	if running, _ := e.sharedDaemon(l4); !running {
		t.Fatal("shared daemon not running after restart with shares prepared")
	}
	if profile == "l4-4-r615" {
		var want []string
		for uid, c := range m2.Prepared() {
			if c.State == checkpoint.PrepareCompleted {
				want = append(want, "share-id-"+strings.TrimPrefix(uid, "uid-"))
			}
		}
		slices.Sort(want)
		if got := e.namespaces(t, l4); !slices.Equal(got, want) {
			t.Errorf("daemon namespaces after restart %v, want the prepared shares' %v", got, want)
		}
	}
	for uid, c := range m2.Prepared() {
		if err := m2.Unprepare(ctx, uid, c.Namespace, c.Name); err != nil {
			t.Fatal(err)
		}
	}
	if _, known := e.sharedDaemon(l4); known {
		t.Error("shared daemon left after every share went")
	}
	if ds, _ := e.sim.MPSDaemons(ctx); len(ds) != 0 {
		t.Errorf("daemons left: %+v", ds)
	}
}

// TestCapacitySharesConcurrent prepares and unprepares many shares of two
// GPUs at once (run under -race by make test): every share that fits is
// prepared exactly once, none over-commits, and the daemons follow.
func TestCapacitySharesConcurrent(t *testing.T) {
	e := capacityEnv(t, "l4-4")
	m, res := e.start(nil)
	ctx := ctxFor(t)
	const per = 6 // 6 x 3Gi = 18Gi of each 22.5Gi GPU
	var wg sync.WaitGroup
	errs := make(chan error, 4*per)
	for round := range 2 {
		for _, dev := range []string{"gpu-0", "gpu-1"} {
			for i := range per {
				wg.Add(1)
				go func() {
					defer wg.Done()
					name := fmt.Sprintf("%s-%d", dev, i)
					if round == 0 {
						if _, err := m.Prepare(ctx, shareClaim(name, dev, "3Gi", 9)); err != nil {
							errs <- err
						}
						return
					}
					if i%2 == 0 {
						if err := m.Unprepare(ctx, "uid-"+name, "default", name); err != nil {
							errs <- err
						}
					}
				}()
			}
		}
		wg.Wait()
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := len(m.Prepared()); got != per {
		t.Fatalf("%d shares prepared, want %d", got, per)
	}
	for _, dev := range []string{"gpu-0", "gpu-1"} {
		if running, _ := e.sharedDaemon(res.Devices[dev].GPU.UUID); !running {
			t.Errorf("%s: shared daemon not running", dev)
		}
	}
	if _, d := m.SharingCounts(); d != 2 {
		t.Errorf("daemons = %d, want 2", d)
	}
}

// TestCapacityDeadSharedDaemonStartedOnce: the daemon two shares use dies;
// the periodic check starts it once, and both shares' pipes are its.
func TestCapacityDeadSharedDaemonStartedOnce(t *testing.T) {
	e := capacityEnv(t, "l4-4")
	m, res := e.start(nil)
	ctx := ctxFor(t)
	l4 := res.Devices["gpu-2"].GPU.UUID
	for _, n := range []string{"a", "b"} {
		if _, err := m.Prepare(ctx, shareClaim(n, "gpu-2", "4Gi", 0)); err != nil {
			t.Fatal(err)
		}
	}
	e.killDaemon(sharedDaemonID(l4))
	n, err := m.EnsureSharing(ctx)
	if err != nil || n != 1 {
		t.Fatalf("EnsureSharing = %d, %v; want 1 restart", n, err)
	}
	if running, _ := e.sharedDaemon(l4); !running {
		t.Fatal("shared daemon not restarted")
	}
}

// TestCapacityRebuildFromSpecs: a corrupt checkpoint is rebuilt from the
// claims' specs with each share's ShareID and consumption.
func TestCapacityRebuildFromSpecs(t *testing.T) {
	e := capacityEnv(t, "l4-4")
	m, _ := e.start(nil)
	ctx := ctxFor(t)
	if _, err := m.Prepare(ctx, shareClaim("a", "gpu-3", "5Gi", 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Prepare(ctx, shareClaim("whole", "gpu-2", "23034Mi", 0)); err != nil {
		t.Fatal(err)
	}
	e.corruptCheckpoint("{garbage")
	m2, _ := e.start(nil)
	a := m2.Prepared()["uid-a"].Devices
	if len(a) != 1 || a[0].ShareID != "share-id-a" || !a[0].Sharing.IsShare() || a[0].Sharing.Share.MemoryBytes != 5<<30 {
		t.Fatalf("rebuilt share: %+v", a)
	}
	if w := m2.Prepared()["uid-whole"].Devices; len(w) != 1 || w[0].ShareID != "share-id-whole" {
		t.Fatalf("rebuilt whole claim: %+v", w)
	}
	// Still one share of 5Gi: 18Gi more fit on gpu-3, 19Gi do not.
	if _, err := m2.Prepare(ctx, shareClaim("big", "gpu-3", "19Gi", 0)); !errors.Is(err, ErrDeviceInUse) {
		t.Fatalf("over-commit after rebuild: %v", err)
	}
}

// TestCapacitySharesOfAMIGInstance: a static MIG instance is shared like a
// GPU, under a daemon of its own that serves the instance's UUID.
func TestCapacitySharesOfAMIGInstance(t *testing.T) {
	e := capacityEnv(t, "dgx-h100-mig")
	m, res := e.start(nil)
	ctx := ctxFor(t)
	const dev = "gpu-6-mig-1g-10gb-0"
	mig := res.Devices[dev].Partition.UUID
	for _, n := range []string{"a", "b"} {
		devs, err := m.Prepare(ctx, shareClaim(n, dev, "4Gi", 8))
		if err != nil {
			t.Fatal(err)
		}
		env, _ := e.containerEdits(devs[0].CDIDeviceIDs)
		for _, want := range []string{"CUDA_VISIBLE_DEVICES=" + mig, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4096M", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50"} {
			if !contains(env, want) {
				t.Errorf("share %s: env %v lacks %s", n, env, want)
			}
		}
	}
	if running, _ := e.sharedDaemon(mig); !running {
		t.Fatal("the instance's shared daemon is not running")
	}
	if _, err := m.Prepare(ctx, shareClaim("c", dev, "2Gi", 0)); !errors.Is(err, ErrDeviceInUse) {
		t.Fatalf("a third share past the instance's 9984Mi: %v", err)
	}
}

// namespaces are the MPS v3 namespaces of the shared daemon of device uuid,
// sorted (the stand-in's status).
func (e *env) namespaces(t *testing.T, uuid string) []string {
	t.Helper()
	st, err := standin.ReadStatus(filepath.Join(e.mpsRoot(), sharedDaemonID(uuid), "pipe"))
	if err != nil {
		t.Fatal(err)
	}
	return slices.Sorted(maps.Keys(st.Servers["tessera"].Namespaces))
}

// TestCapacitySharesNamespaces: on an R615 node (MPS v3) each share of a
// GPU gets a namespace of its own in the GPU's one daemon, with its limits,
// and its containers mount that namespace's directory alone, never the
// daemon's pipe directory with its control pipe; a share's unprepare
// deletes its namespace and leaves the others'.
func TestCapacitySharesNamespaces(t *testing.T) {
	e := capacityEnv(t, "l4-4-r615")
	m, res := e.start(nil)
	ctx := ctxFor(t)
	l4 := res.Devices["gpu-0"].GPU.UUID
	pipe := filepath.Join(e.mpsRoot(), sharedDaemonID(l4), "pipe")
	for _, tc := range []struct {
		name, memory string
		cus          int64
		limits       string
	}{
		{"a", "7Gi", 0, "pinned_memory_limit=7168M active_thread_percentage=100"},
		{"b", "4Gi", 29, "pinned_memory_limit=4096M active_thread_percentage=50"},
	} {
		devs, err := m.Prepare(ctx, shareClaim(tc.name, "gpu-0", tc.memory, tc.cus))
		if err != nil {
			t.Fatal(err)
		}
		_, mounts := e.containerEdits(devs[0].CDIDeviceIDs)
		if want := filepath.Join(pipe, "tessera", "share-id-"+tc.name); mounts["/tmp/nvidia-mps"] != want {
			t.Errorf("share %s mounts %q at /tmp/nvidia-mps, want its namespace's %s", tc.name, mounts["/tmp/nvidia-mps"], want)
		}
		st, err := standin.ReadStatus(pipe)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Servers["tessera"].Namespaces["share-id-"+tc.name].String(); got != tc.limits {
			t.Errorf("share %s: namespace %s, want %s", tc.name, got, tc.limits)
		}
	}
	if got := e.namespaces(t, l4); !slices.Equal(got, []string{"share-id-a", "share-id-b"}) {
		t.Fatalf("namespaces %v", got)
	}
	if err := m.Unprepare(ctx, "uid-a", "default", "a"); err != nil {
		t.Fatal(err)
	}
	if got := e.namespaces(t, l4); !slices.Equal(got, []string{"share-id-b"}) {
		t.Errorf("after a's unprepare: namespaces %v, want b's alone", got)
	}
	if err := m.Unprepare(ctx, "uid-b", "default", "b"); err != nil {
		t.Fatal(err)
	}
	if _, known := e.sharedDaemon(l4); known {
		t.Error("shared daemon left after the last share went")
	}
}
