package claims

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/tessera-gpu/tessera/api/gpu/v1alpha1"
	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/mps"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sharing"
)

// On mixed-inference: gpu-0, gpu-1 A100 80GB; gpu-2, gpu-3 T4; gpu-4 MI210.

const (
	longSlice = `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":"Long"}}}`
	mpsHalf   = `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":50,"defaultPinnedDeviceMemoryLimit":"10Gi"}}}`
	mpsSlice  = `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"PartitionConfig","sharing":{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":25}}}`
)

// configured is allocated() with an opaque config from the claim for
// request "gpu".
func configured(name, config string, devices ...string) *resourceapi.ResourceClaim {
	c := allocated(name, devices...)
	c.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{{
		Source: resourceapi.AllocationConfigSourceClaim, Requests: []string{"gpu"},
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver: driverName, Parameters: runtime.RawExtension{Raw: []byte(config)},
		}},
	}}
	return c
}

func sharingEnv(t *testing.T, profile string) *env {
	e := newEnv(t, profile)
	e.mps = true
	return e
}

// daemon returns the backend's view of the claim's MPS daemon.
func (e *env) daemon(uid string) (mps.DaemonState, bool) {
	e.t.Helper()
	ds, err := e.sim.MPSDaemons(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	for _, d := range ds {
		if d.ID == uid {
			return d, true
		}
	}
	return mps.DaemonState{}, false
}

// injected resolves every CDI ID the claim's devices got, as a runtime
// would, into an empty OCI spec.
func (e *env) injected(ids []string) *specs.Spec {
	e.t.Helper()
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(e.cdiDir()), cdiapi.WithAutoRefresh(false))
	if err != nil {
		e.t.Fatal(err)
	}
	spec := &specs.Spec{Process: &specs.Process{}, Linux: &specs.Linux{}}
	if _, err := cache.InjectDevices(spec, ids...); err != nil {
		e.t.Fatalf("inject %v: %v", ids, err)
	}
	return spec
}

// containerEdits is the process env and mounts injected for ids.
func (e *env) containerEdits(ids []string) (env []string, mounts map[string]string) {
	e.t.Helper()
	spec := e.injected(ids)
	mounts = map[string]string{}
	for _, m := range spec.Mounts {
		mounts[m.Destination] = m.Source
	}
	return spec.Process.Env, mounts
}

func TestTimeSliceSetAndRestored(t *testing.T) {
	e := sharingEnv(t, "mixed-inference")
	m, res := e.start(nil)
	ctx := ctxFor(t)
	t4 := res.Devices["gpu-2"].GPU.UUID
	if _, err := m.Prepare(ctx, configured("ts", longSlice, "gpu-2")); err != nil {
		t.Fatal(err)
	}
	if got := e.timeSlice(t4); got != backend.TimeSliceLong {
		t.Fatalf("interval after prepare %s, want Long", got)
	}
	if got := m.Prepared()["uid-ts"].Devices[0].Sharing; got == nil || got.TimeSlice != v1alpha1.LongTimeSlice {
		t.Fatalf("checkpoint sharing %+v", got)
	}
	// A restart re-applies nothing harmful and keeps it.
	m2, _ := e.start(nil)
	if got := e.timeSlice(t4); got != backend.TimeSliceLong {
		t.Fatalf("interval after restart %s, want Long", got)
	}
	if err := m2.Unprepare(ctx, "uid-ts", "default", "ts"); err != nil {
		t.Fatal(err)
	}
	if got := e.timeSlice(t4); got != backend.TimeSliceDefault {
		t.Fatalf("interval after unprepare %s, want Default", got)
	}
}

func TestMPSDaemonLifecycle(t *testing.T) {
	e := sharingEnv(t, "mixed-inference")
	m, res := e.start(nil)
	ctx := ctxFor(t)
	a100 := res.Devices["gpu-1"].GPU.UUID
	devs, err := m.Prepare(ctx, configured("mps", mpsHalf, "gpu-1"))
	if err != nil {
		t.Fatal(err)
	}
	d, ok := e.daemon("uid-mps")
	if !ok || !d.Running {
		t.Fatalf("daemon after prepare: %+v %v", d, ok)
	}
	env, mounts := e.containerEdits(devs[0].CDIDeviceIDs)
	for _, want := range []string{
		"CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps",
		"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50",
		"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=10240M",
		"CUDA_VISIBLE_DEVICES=" + a100,
		"NVIDIA_VISIBLE_DEVICES=" + a100,
	} {
		if !contains(env, want) {
			t.Errorf("container env %v lacks %s", env, want)
		}
	}
	pipe := mounts["/tmp/nvidia-mps"]
	if pipe == "" {
		t.Fatalf("no pipe mount in %v", mounts)
	}
	if _, err := os.Stat(pipe); err != nil {
		t.Errorf("pipe dir: %v", err)
	}

	// An agent restart adopts the daemon; it is not started again.
	restarts := 0
	e.mpsRestarted = func(n int) { restarts += n }
	m2, _ := e.start(nil)
	if d2, ok := e.daemon("uid-mps"); !ok || !d2.Running {
		t.Fatalf("daemon after restart: %+v", d2)
	}
	if restarts != 0 {
		t.Errorf("%d restarts after an agent restart, want 0 (adopted)", restarts)
	}
	if err := m2.Unprepare(ctx, "uid-mps", "default", "mps"); err != nil {
		t.Fatal(err)
	}
	if d, ok := e.daemon("uid-mps"); ok {
		t.Fatalf("daemon after unprepare: %+v", d)
	}
	if _, err := os.Stat(pipe); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pipe dir after unprepare: %v", err)
	}
}

func TestMPSDeadDaemonStartedAgain(t *testing.T) {
	e := sharingEnv(t, "mixed-inference")
	restarts := 0
	e.mpsRestarted = func(n int) { restarts += n }
	m, _ := e.start(nil)
	ctx := ctxFor(t)
	if _, err := m.Prepare(ctx, configured("mps", mpsHalf, "gpu-0")); err != nil {
		t.Fatal(err)
	}
	e.killDaemon("uid-mps")
	if d, _ := e.daemon("uid-mps"); d.Running {
		t.Fatal("daemon still running after kill")
	}
	n, err := m.EnsureSharing(ctx)
	if err != nil || n != 1 || restarts != 1 {
		t.Fatalf("EnsureSharing: %d restarted, %v; metric %d", n, err, restarts)
	}
	if d, _ := e.daemon("uid-mps"); !d.Running {
		t.Fatal("daemon not running again")
	}
	if err := m.Unprepare(ctx, "uid-mps", "default", "mps"); err != nil {
		t.Fatal(err)
	}
}

func TestMPSOnPartition(t *testing.T) {
	e := sharingEnv(t, "dgx-h100")
	e.partitioning = publish.Dynamic
	m, _ := e.start(nil)
	ctx := ctxFor(t)
	c := configured("slice", mpsSlice, "gpu-7-mig-1g-10gb-6")
	c.Status.Allocation.Devices.Config[0].Requests = nil
	devs, err := m.Prepare(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	migUUID := m.Prepared()["uid-slice"].Devices[0].PartitionUUID
	if !strings.HasPrefix(migUUID, "MIG-") {
		t.Fatalf("partition UUID %q", migUUID)
	}
	env, _ := e.containerEdits(devs[0].CDIDeviceIDs)
	if !contains(env, "CUDA_VISIBLE_DEVICES="+migUUID) || !contains(env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25") {
		t.Errorf("env %v", env)
	}
	if err := m.Unprepare(ctx, "uid-slice", "default", "slice"); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.daemon("uid-slice"); ok || e.totalPartitions() != 0 {
		t.Fatalf("left: daemon %v, %d partitions", ok, e.totalPartitions())
	}
}

func TestSharingRefusedFailsOnlyThatClaim(t *testing.T) {
	e := sharingEnv(t, "mixed-inference")
	m, _ := e.start(nil)
	ctx := ctxFor(t)
	if _, err := m.Prepare(ctx, allocated("plain", "gpu-3")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		claim *resourceapi.ResourceClaim
		want  string
	}{
		{configured("mps-amd", mpsHalf, "gpu-4"), `request "gpu", device gpu-4: status.allocation.devices.config[0].opaque.parameters.sharing.strategy (from claim): MPS is not supported on AMD GPUs`},
		{configured("long-amd", longSlice, "gpu-4"), "Long cannot be set on AMD GPUs"},
		{configured("too-much", strings.Replace(mpsHalf, "10Gi", "20Gi", 1), "gpu-2"), "20Gi is more than the device's memory"},
		{configured("bad", `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"threads":1}}}`, "gpu-2"), `unknown field "sharing.mps.threads"`},
	} {
		_, err := m.Prepare(ctx, tc.claim)
		if !errors.Is(err, ErrConfigRejected) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "default/"+tc.claim.Name) {
			t.Errorf("%s: %v, want ErrConfigRejected naming the claim and %q", tc.claim.Name, err, tc.want)
		}
		if _, ok := m.Prepared()[string(tc.claim.UID)]; ok || e.hasSpec(string(tc.claim.UID)) {
			t.Errorf("%s: refused claim left an entry or spec", tc.claim.Name)
		}
	}
	if c := m.Prepared()["uid-plain"]; c.State != checkpoint.PrepareCompleted {
		t.Errorf("the other claim: %+v", c)
	}
}

// A GPU's time slice is one setting: a second claim on that GPU asking
// another interval is refused. (Two claims on one whole GPU need shares;
// here the other claim's record is planted, as a share would leave it.)
func TestIntervalConflict(t *testing.T) {
	e := sharingEnv(t, "mixed-inference")
	m, res := e.start(nil)
	t4 := res.Devices["gpu-2"].GPU.UUID
	m.cp.Claims["uid-other"] = &checkpoint.Claim{UID: "uid-other", Namespace: "ns", Name: "other", State: checkpoint.PrepareCompleted,
		Devices: []checkpoint.Device{{Device: "gpu-2", GPUUUID: t4, Sharing: &sharingLong}}}
	m.touch("uid-other") // planted: written with the next save
	short := strings.Replace(longSlice, "Long", "Short", 1)
	c := configured("short", short, "gpu-2")
	devs, err := m.resolve(c)
	if err != nil {
		t.Fatal(err)
	}
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx := klog.NewContext(context.Background(), logger)
	err = m.checkIntervals(ctx, "uid-short", devs)
	if !errors.Is(err, ErrDeviceInUse) || !strings.Contains(err.Error(), "asks time-slice interval Short, but its GPU "+t4+" runs at Long for another prepared claim") {
		t.Fatalf("got %v", err)
	}
	// The refusal reaches the claim's status and events: whose claim holds
	// the interval goes only to the agent's log.
	if strings.Contains(err.Error(), "ns/other") {
		t.Errorf("the refusal names the other claim: %v", err)
	}
	if log := logger.GetSink().(ktesting.Underlier).GetBuffer().String(); !strings.Contains(log, "ns/other") {
		t.Errorf("the agent's log does not name the holder:\n%s", log)
	}
	if err := m.checkIntervals(ctx, "uid-short", mustResolve(t, m, configured("long", longSlice, "gpu-2"))); err != nil {
		t.Errorf("the same interval: %v", err)
	}
}

var sharingLong = sharingSettings(v1alpha1.TimeSlicing, v1alpha1.LongTimeSlice)

func mustResolve(t *testing.T, m *Manager, c *resourceapi.ResourceClaim) []planned {
	t.Helper()
	devs, err := m.resolve(c)
	if err != nil {
		t.Fatal(err)
	}
	return devs
}

// mustAdmit is mustResolve and every effect's check, as admit runs them:
// what a check reads (a passthrough's IOMMU group) is in devs after.
func mustAdmit(t *testing.T, m *Manager, c *resourceapi.ResourceClaim) []planned {
	t.Helper()
	devs := mustResolve(t, m, c)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkEffects(ctxFor(t), string(c.UID), devs); err != nil {
		t.Fatal(err)
	}
	return devs
}

// Every crash point of a shared claim's prepare and unprepare leaves it
// prepared once (daemon up, interval set) or absent (no daemon, default
// interval) after a restart.
func TestSharingCrashAtEveryStep(t *testing.T) {
	claims := map[string]*resourceapi.ResourceClaim{
		"mps":  configured("c", mpsHalf, "gpu-0"),
		"long": configured("c", longSlice, "gpu-2"),
	}
	for kind, claim := range claims {
		for _, step := range []crashStep{stepPrepareStarted, stepSharingApplied, stepSpecWritten, stepPrepareCompleted} {
			t.Run(kind+"/prepare/"+string(step), func(t *testing.T) {
				e := sharingEnv(t, "mixed-inference")
				m, res := e.start(crashAt(step))
				ctx := ctxFor(t)
				gpu := res.Devices[claim.Status.Allocation.Devices.Results[0].Device].GPU.UUID
				if _, err := m.Prepare(ctx, claim); !errors.Is(err, errInjected) {
					t.Fatalf("prepare: %v, want injected stop", err)
				}
				m2, _ := e.start(nil)
				e.assertConsistent(m2, "uid-c")
				e.assertSharing(m2, "uid-c", kind, gpu)
				if _, err := m2.Prepare(ctx, claim); err != nil {
					t.Fatalf("prepare after restart: %v", err)
				}
				e.assertSharing(m2, "uid-c", kind, gpu)
				if err := m2.Unprepare(ctx, "uid-c", "default", "c"); err != nil {
					t.Fatal(err)
				}
				e.assertSharing(m2, "uid-c", kind, gpu)
			})
		}
		for _, step := range []crashStep{stepUnprepareStarted, stepSpecRemoved, stepUnprepareFinished} {
			t.Run(kind+"/unprepare/"+string(step), func(t *testing.T) {
				e := sharingEnv(t, "mixed-inference")
				m, res := e.start(nil)
				ctx := ctxFor(t)
				gpu := res.Devices[claim.Status.Allocation.Devices.Results[0].Device].GPU.UUID
				if _, err := m.Prepare(ctx, claim); err != nil {
					t.Fatal(err)
				}
				m.crashHook = crashAt(step)
				if err := m.Unprepare(ctx, "uid-c", "default", "c"); !errors.Is(err, errInjected) {
					t.Fatalf("unprepare: %v, want injected stop", err)
				}
				m2, _ := e.start(nil)
				if _, ok := m2.Prepared()["uid-c"]; ok {
					t.Fatal("claim still recorded after restart")
				}
				e.assertSharing(m2, "uid-c", kind, gpu)
			})
		}
	}
}

// assertSharing checks that the node matches the checkpoint for a shared
// claim: recorded and completed means daemon up or interval set; absent
// means neither.
func (e *env) assertSharing(m *Manager, uid, kind, gpu string) {
	e.t.Helper()
	c, prepared := m.Prepared()[uid]
	prepared = prepared && c.State == checkpoint.PrepareCompleted
	switch kind {
	case "mps":
		d, ok := e.daemon(uid)
		if prepared != (ok && d.Running) || (!prepared && ok) {
			e.t.Errorf("prepared=%v but daemon %+v (known %v)", prepared, d, ok)
		}
	case "long":
		want := backend.TimeSliceDefault
		if prepared {
			want = backend.TimeSliceLong
		}
		if got := e.timeSlice(gpu); got != want {
			e.t.Errorf("prepared=%v but GPU interval %s", prepared, got)
		}
	}
}

// killDaemon kills a claim's daemon behind the agent's back.
func (e *env) killDaemon(uid string) {
	e.t.Helper()
	data, err := os.ReadFile(filepath.Join(e.mpsRoot(), uid, "record.json"))
	if err != nil {
		e.t.Fatal(err)
	}
	pid := jsonInt(e.t, data, "pid")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		e.t.Fatal(err)
	}
	e.waitDead(uid)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// timeSlice is the simulated GPU's interval now.
func (e *env) timeSlice(gpu string) backend.TimeSlice {
	e.t.Helper()
	ts, err := e.sim.TimeSlice(gpu)
	if err != nil {
		e.t.Fatal(err)
	}
	return ts
}

// waitDead waits until the backend no longer sees the daemon running.
func (e *env) waitDead(uid string) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if d, _ := e.daemon(uid); !d.Running {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.t.Fatalf("daemon %s still running", uid)
}

// stopDaemons stops whatever daemon a test left, so none outlives it.
func (e *env) stopDaemons() {
	ctx := context.Background()
	ds, _ := e.sim.MPSDaemons(ctx)
	for _, d := range ds {
		_ = e.sim.StopMPS(ctx, d.ID)
	}
}

func jsonInt(t testing.TB, data []byte, key string) int {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	v, ok := m[key].(float64)
	if !ok {
		t.Fatalf("no %s in %s", key, data)
	}
	return int(v)
}

func sharingSettings(s v1alpha1.SharingStrategy, ts v1alpha1.TimeSliceInterval) sharing.Settings {
	return sharing.Settings{Strategy: s, TimeSlice: ts}
}
