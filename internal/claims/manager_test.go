package claims

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
)

func TestPrepareUnprepare(t *testing.T) {
	e := newEnv(t, "dgx-h100")
	m, _ := e.start(nil)
	ctx := ctxFor(t)
	claim := allocated("train", "gpu-0", "gpu-1")

	devs, err := m.Prepare(ctx, claim)
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 2 || devs[0].Name != "gpu-0" || devs[1].Name != "gpu-1" || len(devs[0].CDIDeviceIDs) == 0 {
		t.Fatalf("devices %+v", devs)
	}
	if !e.hasSpec("uid-train") {
		t.Fatal("no CDI spec after prepare")
	}
	if st := m.Prepared()["uid-train"].State; st != checkpoint.PrepareCompleted {
		t.Fatalf("checkpoint state %q", st)
	}

	again, err := m.Prepare(ctx, claim)
	if err != nil || !reflect.DeepEqual(again, devs) {
		t.Fatalf("second prepare = %+v, %v; want %+v", again, err, devs)
	}

	if err := m.Unprepare(ctx, "uid-train", "default", "train"); err != nil {
		t.Fatal(err)
	}
	if e.hasSpec("uid-train") || len(m.Prepared()) != 0 {
		t.Fatalf("after unprepare: spec %v, claims %v", e.hasSpec("uid-train"), m.Prepared())
	}
	if err := m.Unprepare(ctx, "uid-train", "default", "train"); err != nil {
		t.Fatalf("unprepare of an unprepared claim: %v", err)
	}
}

func TestPrepareErrors(t *testing.T) {
	e := newEnv(t, "dgx-h100")
	m, _ := e.start(nil)
	ctx := ctxFor(t)
	if _, err := m.Prepare(ctx, allocated("holder", "gpu-3")); err != nil {
		t.Fatal(err)
	}
	foreignPool := allocated("elsewhere", "gpu-0")
	foreignPool.Status.Allocation.Devices.Results[0].Pool = "node-2"
	withConfig := allocated("configured", "gpu-5")
	withConfig.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{{
		Source: resourceapi.AllocationConfigSourceClaim, Requests: []string{"gpu"},
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: driverName, Parameters: runtime.RawExtension{Raw: []byte(`{}`)}}},
	}}
	unallocated := allocated("pending")
	unallocated.Status.Allocation = nil

	tests := []struct {
		claim *resourceapi.ResourceClaim
		want  []string
		// notWant: the error reaches the claim's status and pod events, so
		// it names no other claim (the agent's log does).
		notWant string
	}{
		{allocated("ghost", "gpu-0", "gpu-42"), []string{"default/ghost", "gpu-42", "not on this node"}, ""},
		{foreignPool, []string{"default/elsewhere", "node-2/gpu-0"}, ""},
		{allocated("thief", "gpu-3"), []string{"default/thief", "gpu-3", "in use by another prepared claim (its device gpu-3)"}, "holder"},
		{withConfig, []string{"default/configured", "status.allocation.devices.config[0].opaque.parameters (from claim): apiVersion: Required value", "gpu.tessera.dev/v1alpha1"}, ""},
		{unallocated, []string{"default/pending", "not allocated"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.claim.Name, func(t *testing.T) {
			_, err := m.Prepare(ctx, tc.claim)
			if err == nil {
				t.Fatal("prepare succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if tc.notWant != "" && strings.Contains(err.Error(), tc.notWant) {
				t.Errorf("error %q names another claim (%q)", err, tc.notWant)
			}
			if e.hasSpec(string(tc.claim.UID)) {
				t.Error("failed claim left a CDI spec")
			}
			if _, ok := m.Prepared()[string(tc.claim.UID)]; ok {
				t.Error("failed claim left a checkpoint entry")
			}
		})
	}
	if len(e.specFiles()) != 1 {
		t.Errorf("spec files %v, want only the holder's", e.specFiles())
	}
}

// TestCrashAtEveryStep stops the agent after each step of prepare and of
// unprepare, restarts it over the same disk, and checks that the claim is
// prepared exactly once or cleanly absent, and can then be prepared.
func TestCrashAtEveryStep(t *testing.T) {
	prepareSteps := []crashStep{stepPrepareStarted, stepSpecWritten, stepPrepareCompleted}
	for _, step := range prepareSteps {
		t.Run("prepare/"+string(step), func(t *testing.T) {
			e := newEnv(t, "dgx-h100")
			m, _ := e.start(crashAt(step))
			ctx := ctxFor(t)
			claim := allocated("c", "gpu-2")
			if _, err := m.Prepare(ctx, claim); !errors.Is(err, errInjected) {
				t.Fatalf("prepare: %v, want injected stop", err)
			}
			m2, _ := e.start(nil)
			e.assertConsistent(m2, "uid-c")
			if _, err := m2.Prepare(ctx, claim); err != nil {
				t.Fatalf("prepare after restart: %v", err)
			}
			if len(e.specFiles()) != 1 || m2.Prepared()["uid-c"].State != checkpoint.PrepareCompleted {
				t.Fatalf("after retry: specs %v, claims %v", e.specFiles(), m2.Prepared())
			}
		})
	}
	unprepareSteps := []crashStep{stepUnprepareStarted, stepSpecRemoved, stepUnprepareFinished}
	for _, step := range unprepareSteps {
		t.Run("unprepare/"+string(step), func(t *testing.T) {
			e := newEnv(t, "dgx-h100")
			m, _ := e.start(nil)
			ctx := ctxFor(t)
			claim := allocated("c", "gpu-2")
			if _, err := m.Prepare(ctx, claim); err != nil {
				t.Fatal(err)
			}
			m.crashHook = crashAt(step)
			if err := m.Unprepare(ctx, "uid-c", "default", "c"); !errors.Is(err, errInjected) {
				t.Fatalf("unprepare: %v, want injected stop", err)
			}
			// A claim with nothing on the node but its spec saves no intent:
			// after the restart it is either gone or still recorded as
			// prepared (its spec possibly gone, as after a reboot), and the
			// kubelet's retried unprepare, which always comes, finishes it.
			m2, _ := e.start(nil)
			if c, ok := m2.Prepared()["uid-c"]; ok && c.State != checkpoint.PrepareCompleted {
				t.Fatalf("after restart: entry %+v", c)
			}
			if err := m2.Unprepare(ctx, "uid-c", "default", "c"); err != nil {
				t.Fatalf("kubelet's retried unprepare: %v", err)
			}
			if _, ok := m2.Prepared()["uid-c"]; ok || e.hasSpec("uid-c") {
				t.Fatalf("claim half unprepared after the retry: entry %v, spec %v", m2.Prepared()["uid-c"], e.hasSpec("uid-c"))
			}
			m3, _ := e.start(nil)
			if _, ok := m3.Prepared()["uid-c"]; ok {
				t.Fatal("unprepared claim recorded after another restart")
			}
		})
	}
}

func crashAt(s crashStep) func(crashStep) error {
	return func(got crashStep) error {
		if got == s {
			return errInjected
		}
		return nil
	}
}

// assertConsistent: either a completed entry and its spec, or neither.
func (e *env) assertConsistent(m *Manager, uid string) {
	e.t.Helper()
	c, ok := m.Prepared()[uid]
	spec := e.hasSpec(uid)
	switch {
	case ok && c.State == checkpoint.PrepareCompleted && spec:
	case !ok && !spec:
	default:
		e.t.Fatalf("claim %s half prepared: entry %+v (present %v), spec %v", uid, c, ok, spec)
	}
}

func TestCorruptCheckpointRebuiltFromSpecs(t *testing.T) {
	e := newEnv(t, "mixed-inference")
	m, res := e.start(nil)
	ctx := ctxFor(t)
	want, err := m.Prepare(ctx, allocated("kept", res.Order[0], res.Order[len(res.Order)-1]))
	if err != nil {
		t.Fatal(err)
	}
	e.corruptCheckpoint(`{"checksum":"sha256:00","checkpoint":{`)
	m2, _ := e.start(nil)
	got, err := m2.Prepare(ctx, allocated("kept", res.Order[0], res.Order[len(res.Order)-1]))
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("prepare after rebuild = %+v, %v; want %+v", got, err, want)
	}
	// The rebuilt entry still guards the devices.
	if _, err := m2.Prepare(ctx, allocated("other", res.Order[0])); err == nil {
		t.Fatal("rebuilt checkpoint lost the claim's devices")
	}
	moved, _ := os.ReadDir(e.dir + "/plugin")
	var aside bool
	for _, f := range moved {
		aside = aside || strings.Contains(f.Name(), ".corrupt-")
	}
	if !aside {
		t.Errorf("corrupt checkpoint not kept aside: %v", moved)
	}
}

// TestCorruptLogRecord: a record of the checkpoint's log that does not
// verify stops the replay there; the agent starts from the state before
// it, adds the claims prepared since from their specs, keeps every spec,
// and has every claim confirmed again.
func TestCorruptLogRecord(t *testing.T) {
	e := newEnv(t, "dgx-h100")
	m, _ := e.start(nil)
	ctx := ctxFor(t)
	for i, name := range []string{"a", "b", "c"} {
		if _, err := m.Prepare(ctx, allocated(name, fmt.Sprintf("gpu-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	// Line 0 is the log's header, then one record a prepare.
	log := e.checkpointPath() + ".log"
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) < 4 || !bytes.Contains(lines[2], []byte(`"uid-b"`)) {
		t.Fatalf("log lines %q, want the header and a record per prepare", lines)
	}
	lines[2] = bytes.Replace(lines[2], []byte(`"name":"b"`), []byte(`"name":"x"`), 1)
	if err := os.WriteFile(log, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	m2, _ := e.start(nil)
	got := m2.Prepared()
	for _, uid := range []string{"uid-a", "uid-b", "uid-c"} {
		c, ok := got[uid]
		if !ok || c.State != checkpoint.PrepareCompleted || !c.Unconfirmed || !e.hasSpec(uid) {
			t.Errorf("claim %s after the corrupt log: %+v (recorded %v, spec %v); want prepared, unconfirmed, its spec kept", uid, c, ok, e.hasSpec(uid))
		}
	}
	if aside, _ := filepath.Glob(log + ".corrupt-*"); len(aside) != 1 {
		t.Errorf("corrupt log moved aside to %v", aside)
	}
	// The kubelet's prepare confirms a claim, and the next start loads
	// without complaint.
	if _, err := m2.Prepare(ctx, allocated("b", "gpu-1")); err != nil {
		t.Fatal(err)
	}
	if c := m2.Prepared()["uid-b"]; c.Unconfirmed {
		t.Error("prepared again, the claim is still unconfirmed")
	}
	if _, err := checkpoint.Read(e.checkpointPath()); err != nil {
		t.Fatal(err)
	}
}

func TestRebootRewritesSpecs(t *testing.T) {
	e := newEnv(t, "dgx-h100")
	m, _ := e.start(nil)
	ctx := ctxFor(t)
	claim := allocated("survivor", "gpu-7")
	if _, err := m.Prepare(ctx, claim); err != nil {
		t.Fatal(err)
	}
	// A reboot empties /var/run/cdi; the checkpoint under /var/lib survives.
	for _, f := range e.specFiles() {
		os.Remove(f)
	}
	e.bootID = "boot-2"
	m2, _ := e.start(nil)
	if _, err := m2.Prepare(ctx, claim); err != nil {
		t.Fatal(err)
	}
	if !e.hasSpec("uid-survivor") {
		t.Fatal("spec not rewritten after reboot")
	}
}

// TestUnconfirmedClaimYields: a claim prepared before a reboot that the kubelet
// has not prepared again (an unprepare whose checkpoint write the power loss
// undid) gives way, spec and entry, to a claim allocated its device; one
// the kubelet prepared again holds its device as before, across restarts.
func TestUnconfirmedClaimYields(t *testing.T) {
	e := newEnv(t, "dgx-h100")
	m, _ := e.start(nil)
	ctx := ctxFor(t)
	for _, c := range []*resourceapi.ResourceClaim{allocated("gone", "gpu-7"), allocated("survivor", "gpu-6")} {
		if _, err := m.Prepare(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	e.bootID = "boot-2"
	var released []Evidence
	e.released = func(ev Evidence, _ string, _ ClaimRef) { released = append(released, ev) }
	m2, _ := e.start(nil)
	if _, err := m2.Prepare(ctx, allocated("survivor", "gpu-6")); err != nil {
		t.Fatal(err)
	}
	if _, err := m2.Prepare(ctx, allocated("new", "gpu-7")); err != nil {
		t.Fatalf("claim allocated the device of a claim left from before the reboot: %v", err)
	}
	got := m2.Prepared()
	if _, ok := got["uid-gone"]; ok || e.hasSpec("uid-gone") {
		t.Errorf("the leftover claim is still recorded (%v) or has its spec (%v)", ok, e.hasSpec("uid-gone"))
	}
	if c, ok := got["uid-new"]; !ok || c.State != checkpoint.PrepareCompleted {
		t.Errorf("new claim: %+v", c)
	}
	if !slices.Equal(released, []Evidence{EvidenceUnconfirmed}) {
		t.Errorf("released %v, want [unconfirmed]", released)
	}
	m3, _ := e.start(nil) // same boot: the survivor's flag was saved cleared
	if c := m3.Prepared()["uid-survivor"]; c.Unconfirmed {
		t.Error("the claim prepared again after the reboot is still marked")
	}
	_, err := m3.Prepare(ctx, allocated("intruder", "gpu-6"))
	if !errors.Is(err, ErrDeviceInUse) {
		t.Fatalf("a claim for the device of a claim prepared again after the reboot: %v, want ErrDeviceInUse", err)
	}
}

func TestOrphanSpecRemovedOnStart(t *testing.T) {
	e := newEnv(t, "t4-2")
	m, _ := e.start(nil)
	ctx := ctxFor(t)
	if _, err := m.Prepare(ctx, allocated("a", "gpu-0")); err != nil {
		t.Fatal(err)
	}
	// A checkpoint that lost the claim (e.g. restored from an old copy).
	if err := checkpoint.NewStore(e.checkpointPath()).Save(checkpoint.New()); err != nil {
		t.Fatal(err)
	}
	e.start(nil)
	if e.hasSpec("uid-a") {
		t.Fatal("spec of an unrecorded claim survived start")
	}
}

func TestManyClaimsIndependent(t *testing.T) {
	e := newEnv(t, "dgx-h100")
	m, _ := e.start(nil)
	ctx := ctxFor(t)
	for i := 0; i < 8; i++ {
		if _, err := m.Prepare(ctx, allocated(fmt.Sprintf("c%d", i), fmt.Sprintf("gpu-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(e.specFiles()); n != 8 {
		t.Fatalf("%d specs, want 8", n)
	}
}

// TestConcurrentPlainClaims runs prepares and unprepares of claims without
// side effects in parallel (under -race in make test): each of several
// claims racing for one GPU, and many claims of distinct GPUs. Exactly one
// claim gets each GPU, every winner is recorded and has its spec, and a
// restart sees the same.
func TestConcurrentPlainClaims(t *testing.T) {
	e := newEnv(t, "dgx-h100")
	m, _ := e.start(nil)
	ctx := ctxFor(t)
	var wg sync.WaitGroup
	winners := make([]atomic.Int32, 8)
	for gpu := range 8 {
		for try := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := fmt.Sprintf("g%d-t%d", gpu, try)
				_, err := m.Prepare(ctx, allocated(name, fmt.Sprintf("gpu-%d", gpu)))
				switch {
				case err == nil:
					winners[gpu].Add(1)
				case !errors.Is(err, ErrDeviceInUse):
					t.Errorf("claim %s: %v", name, err)
				}
			}()
		}
	}
	wg.Wait()
	prepared := m.Prepared()
	for gpu := range 8 {
		if n := winners[gpu].Load(); n != 1 {
			t.Errorf("gpu-%d went to %d claims", gpu, n)
		}
	}
	if len(prepared) != 8 || len(e.specFiles()) != 8 {
		t.Fatalf("%d claims recorded, %d specs; want 8 and 8", len(prepared), len(e.specFiles()))
	}
	m2, _ := e.start(nil)
	if got := len(m2.Prepared()); got != 8 {
		t.Fatalf("after restart %d claims, want 8", got)
	}
	for uid, c := range m2.Prepared() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m2.Unprepare(ctx, uid, c.Namespace, c.Name); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if len(m2.Prepared()) != 0 || len(e.specFiles()) != 0 {
		t.Fatalf("left: %v, specs %v", m2.Prepared(), e.specFiles())
	}
	if m3, _ := e.start(nil); len(m3.Prepared()) != 0 {
		t.Fatal("unprepared claims recorded after a restart")
	}
}

// TestKilledWritesLeaveNoTemps: an agent killed in the middle of writing a
// spec or the checkpoint leaves a temp file; the next start removes them
// (unprepare leaves them: looking for them cost a read of the spec
// directory per call, and no runtime loads them).
func TestKilledWritesLeaveNoTemps(t *testing.T) {
	e := newEnv(t, "dgx-h100")
	m, _ := e.start(nil)
	ctx := ctxFor(t)
	if _, err := m.Prepare(ctx, allocated("c", "gpu-0")); err != nil {
		t.Fatal(err)
	}
	specTemp := filepath.Join(e.cdiDir(), ".k8s.gpu.tessera.dev-claim_uid-c.json.4242.tmp")
	otherTemp := filepath.Join(e.cdiDir(), ".k8s.gpu.tessera.dev-claim_uid-gone.json.4243.tmp")
	cpTemp := filepath.Join(filepath.Dir(e.checkpointPath()), "."+filepath.Base(e.checkpointPath())+".4244.tmp")
	for _, p := range []string{specTemp, otherTemp, cpTemp} {
		if err := os.WriteFile(p, []byte("{half"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Unprepare(ctx, "uid-c", "default", "c"); err != nil {
		t.Fatal(err)
	}
	e.start(nil)
	for _, p := range []string{specTemp, otherTemp, cpTemp} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("start left %s: %v", filepath.Base(p), err)
		}
	}
}

// TestCloseLeavesFirstFileCurrent: saves alternate between the checkpoint's
// two files; after Close the first, all an agent from before the two files
// reads, holds the newest state.
func TestCloseLeavesFirstFileCurrent(t *testing.T) {
	e := newEnv(t, "dgx-h100")
	m, _ := e.start(nil)
	ctx := ctxFor(t)
	// firstFileOnly is the checkpoint as a one-file agent sees it.
	firstFileOnly := func() map[string]*checkpoint.Claim {
		t.Helper()
		data, err := os.ReadFile(e.checkpointPath())
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "checkpoint.json")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cp, err := checkpoint.Read(p)
		if err != nil {
			t.Fatal(err)
		}
		return cp.Claims
	}
	// The start saved into the first file; the prepare saves into the other.
	if _, err := m.Prepare(ctx, allocated("a", "gpu-0")); err != nil {
		t.Fatal(err)
	}
	if got := firstFileOnly(); got["uid-a"] != nil {
		t.Fatalf("first file holds the prepare's save already: %v (the test no longer sees the other file)", got)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if got := firstFileOnly(); len(got) != 1 || got["uid-a"] == nil {
		t.Fatalf("first file after Close holds %v, want claim a", got)
	}
	if m2, _ := e.start(nil); m2.Prepared()["uid-a"].UID != "uid-a" {
		t.Fatal("a restart after Close lost the claim")
	}
}
