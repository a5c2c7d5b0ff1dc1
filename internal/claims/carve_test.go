package claims

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
)

func dynamicEnv(t testing.TB, profile string) *env {
	e := newEnv(t, profile)
	e.partitioning = publish.Dynamic
	return e
}

// gpuState is one GPU of the simulated node as the hardware has it now.
func (e *env) gpuState(uuid string) inventory.GPU {
	e.t.Helper()
	inv, err := e.sim.Discover(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	for _, g := range inv.GPUs {
		if g.UUID == uuid {
			return g
		}
	}
	e.t.Fatalf("no GPU %s", uuid)
	return inventory.GPU{}
}

// totalPartitions counts partitions on every GPU of the simulated node.
func (e *env) totalPartitions() int {
	inv, err := e.sim.Discover(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, g := range inv.GPUs {
		n += len(g.Partitions)
	}
	return n
}

func (e *env) spec(uid string) string {
	e.t.Helper()
	data, err := os.ReadFile(e.cdiDir() + "/k8s.gpu.tessera.dev-claim_" + uid + ".json")
	if err != nil {
		e.t.Fatal(err)
	}
	return string(data)
}

func TestDynamicPrepareCarvesAndUnprepareDestroys(t *testing.T) {
	e := dynamicEnv(t, "dgx-h100")
	m, res := e.start(nil)
	ctx := ctxFor(t)
	gpu := res.Devices["gpu-7"].GPU.UUID
	if e.gpuState(gpu).Partitioning.Enabled {
		t.Fatal("dgx-h100 ships with MIG off")
	}

	small := allocated("small", "gpu-7-mig-1g-10gb-6")
	if _, err := m.Prepare(ctx, small); err != nil {
		t.Fatal(err)
	}
	g := e.gpuState(gpu)
	if !g.Partitioning.Enabled || len(g.Partitions) != 1 {
		t.Fatalf("after prepare: MIG %v, partitions %+v; want MIG on and one partition", g.Partitioning.Enabled, g.Partitions)
	}
	p := g.Partitions[0]
	if p.Profile != "1g.10gb" || p.Placement != (inventory.Placement{Start: 6, Size: 1}) {
		t.Fatalf("carved %s at %+v, want 1g.10gb at 6", p.Profile, p.Placement)
	}
	if !strings.Contains(e.spec("uid-small"), p.UUID) {
		t.Errorf("CDI spec does not name the carved partition %s", p.UUID)
	}
	rec := m.Prepared()["uid-small"].Devices[0]
	if !rec.CreatedPartition || rec.PartitionUUID != p.UUID || rec.Placement == nil || rec.Placement.Start != 6 || rec.Profile != "1g.10gb" {
		t.Errorf("checkpoint records %+v", rec)
	}

	big := allocated("big", "gpu-7-mig-3g-40gb-0")
	if _, err := m.Prepare(ctx, big); err != nil {
		t.Fatal(err)
	}
	// Idempotent: the kubelet may call again.
	if _, err := m.Prepare(ctx, big); err != nil {
		t.Fatal(err)
	}
	if n := len(e.gpuState(gpu).Partitions); n != 2 {
		t.Fatalf("%d partitions, want 2", n)
	}

	if err := m.Unprepare(ctx, "uid-small", "default", "small"); err != nil {
		t.Fatal(err)
	}
	g = e.gpuState(gpu)
	if len(g.Partitions) != 1 || !g.Partitioning.Enabled {
		t.Fatalf("after first unprepare: MIG %v, %d partitions; want on, 1", g.Partitioning.Enabled, len(g.Partitions))
	}
	if err := m.Unprepare(ctx, "uid-big", "default", "big"); err != nil {
		t.Fatal(err)
	}
	g = e.gpuState(gpu)
	if len(g.Partitions) != 0 || g.Partitioning.Enabled {
		t.Fatalf("after last unprepare: MIG %v, %d partitions; want off, 0", g.Partitioning.Enabled, len(g.Partitions))
	}
	if cp := m.cp; len(cp.PartitionModeOn) != 0 || len(cp.Claims) != 0 {
		t.Errorf("checkpoint left %+v", cp)
	}
}

func TestDynamicConflictsAreRefused(t *testing.T) {
	e := dynamicEnv(t, "dgx-h100")
	m, _ := e.start(nil)
	ctx := ctxFor(t)
	if _, err := m.Prepare(ctx, allocated("a", "gpu-7-mig-3g-40gb-4")); err != nil {
		t.Fatal(err)
	}
	for _, dev := range []string{"gpu-7-mig-1g-10gb-6", "gpu-7", "gpu-7-mig-7g-80gb-0"} {
		_, err := m.Prepare(ctx, allocated("b-"+dev, dev))
		if !errors.Is(err, ErrDeviceInUse) {
			t.Errorf("%s next to 3g.40gb at 4: err %v, want ErrDeviceInUse", dev, err)
		}
	}
	if _, err := m.Prepare(ctx, allocated("c", "gpu-7-mig-4g-40gb-0")); err != nil {
		t.Errorf("4g.40gb at 0 next to 3g.40gb at 4: %v", err)
	}
	if n := e.totalPartitions(); n != 2 {
		t.Errorf("%d partitions, want 2", n)
	}
}

// faulty fails one backend call by name.
type faulty struct {
	backend.Backend
	fail string // "mode-on", "create", "create-second"
	n    int
}

var errFault = errors.New("injected backend fault")

func (f *faulty) SetPartitionMode(ctx context.Context, gpu string, on bool) error {
	if on && f.fail == "mode-on" {
		return errFault
	}
	return f.Backend.SetPartitionMode(ctx, gpu, on)
}

func (f *faulty) CreatePartition(ctx context.Context, gpu, profile string, at inventory.Placement) (*inventory.Partition, error) {
	f.n++
	if f.fail == "create" || (f.fail == "create-second" && f.n == 2) {
		return nil, errFault
	}
	return f.Backend.CreatePartition(ctx, gpu, profile, at)
}

// TestDynamicFailureRollsBack: a failure at any step of a dynamic prepare
// leaves the node as it was: no partition, MIG mode off, no spec, no entry.
func TestDynamicFailureRollsBack(t *testing.T) {
	devs := []string{"gpu-7-mig-1g-10gb-6", "gpu-6-mig-2g-20gb-4"}
	for _, fail := range []string{"mode-on", "create", "create-second", "cdi"} {
		t.Run(fail, func(t *testing.T) {
			e := dynamicEnv(t, "dgx-h100")
			e.wrap = func(b backend.Backend) backend.Backend { return &faulty{Backend: b, fail: fail} }
			m, _ := e.start(nil)
			ctx := ctxFor(t)
			if fail == "cdi" {
				moveAside(t, e.cdiDir())
				defer func() {
					// The agent restarted with its CDI directory back
					// finishes the rollback the failed removal left.
					os.Remove(e.cdiDir())
					os.Rename(e.cdiDir()+".aside", e.cdiDir())
					m, _ := e.start(nil)
					e.assertClean(t, m)
				}()
			}
			_, err := m.Prepare(ctx, allocated("x", devs...))
			if err == nil {
				t.Fatal("prepare succeeded")
			}
			if fail == "cdi" {
				if n := e.totalPartitions(); n != 0 {
					t.Errorf("%d partitions held while the spec cannot be removed", n)
				}
				return
			}
			if !errors.Is(err, errFault) {
				t.Errorf("error %v does not wrap the backend's", err)
			}
			assertKind(t, err, ErrPartition)
			e.assertClean(t, m)
		})
	}
}

func (e *env) assertClean(t *testing.T, m *Manager) {
	t.Helper()
	if n := e.totalPartitions(); n != 0 {
		t.Errorf("%d partitions left", n)
	}
	inv, _ := e.sim.Discover(context.Background())
	for _, g := range inv.GPUs {
		if g.Partitioning != nil && g.Partitioning.Enabled {
			t.Errorf("GPU %s left in MIG mode", g.UUID)
		}
	}
	if len(e.specFiles()) != 0 {
		t.Errorf("specs left: %v", e.specFiles())
	}
	if len(m.Prepared()) != 0 || len(m.cp.PartitionModeOn) != 0 {
		t.Errorf("checkpoint left %+v", m.cp)
	}
}

// TestDynamicCrashAtEveryStep stops the agent at each step of a dynamic
// prepare, restarts it and checks the node: before PrepareCompleted the
// restart undoes everything; after it the claim stays prepared. Either way
// the kubelet's retry then prepares the claim.
func TestDynamicCrashAtEveryStep(t *testing.T) {
	steps := []crashStep{stepPrepareStarted, stepPartitionCarved, stepSpecWritten, stepPrepareCompleted}
	for _, step := range steps {
		t.Run(string(step), func(t *testing.T) {
			e := dynamicEnv(t, "dgx-h100")
			m, _ := e.start(func(s crashStep) error {
				if s == step {
					return errInjected
				}
				return nil
			})
			ctx := ctxFor(t)
			claim := allocated("x", "gpu-7-mig-1g-10gb-6", "gpu-7-mig-3g-40gb-0")
			if _, err := m.Prepare(ctx, claim); !errors.Is(err, errInjected) {
				t.Fatalf("err %v, want the injected stop", err)
			}
			m, _ = e.start(nil)
			if step == stepPrepareCompleted {
				if n := e.totalPartitions(); n != 2 {
					t.Fatalf("completed claim: %d partitions after restart, want 2", n)
				}
			} else {
				e.assertClean(t, m)
			}
			if _, err := m.Prepare(ctx, claim); err != nil {
				t.Fatalf("retry: %v", err)
			}
			if n := e.totalPartitions(); n != 2 {
				t.Errorf("%d partitions after retry, want 2", n)
			}
			if err := m.Unprepare(ctx, "uid-x", "default", "x"); err != nil {
				t.Fatal(err)
			}
			e.assertClean(t, m)
		})
	}
}

// TestDynamicStartupDestroysOrphans: partitions no prepared claim owns are
// destroyed at start on dynamic nodes and left alone on static ones.
func TestDynamicStartupDestroysOrphans(t *testing.T) {
	static := newEnv(t, "dgx-h100-mig")
	static.start(nil)
	before := static.totalPartitions()
	if before == 0 {
		t.Fatal("dgx-h100-mig has no partitions")
	}
	static.start(nil)
	if n := static.totalPartitions(); n != before {
		t.Fatalf("static node: %d partitions after start, want %d", n, before)
	}

	e := dynamicEnv(t, "dgx-h100-mig")
	orphans := 0
	e.orphanHook = func() { orphans++ }
	_, res := e.start(nil)
	if orphans != before {
		t.Errorf("%d orphans reported, %d destroyed", orphans, before)
	}
	if n := e.totalPartitions(); n != 0 {
		t.Fatalf("dynamic node: %d partitions left after start, want 0 (machine had %d)", n, before)
	}
	// MIG mode was on before the agent; it leaves it on until a whole GPU
	// is prepared, which needs it off.
	gpu := res.Devices["gpu-6"].GPU.UUID
	if !e.gpuState(gpu).Partitioning.Enabled {
		t.Fatal("agent turned off a MIG mode it did not turn on")
	}
	m, _ := e.start(nil)
	if _, err := m.Prepare(ctxFor(t), allocated("whole", "gpu-6")); err != nil {
		t.Fatal(err)
	}
	if e.gpuState(gpu).Partitioning.Enabled {
		t.Error("whole GPU prepared with MIG mode still on")
	}
}

// TestDynamicRebootRecarves: after a reboot the partitions are gone; the
// kubelet's prepare of a surviving claim carves them again.
func TestDynamicRebootRecarves(t *testing.T) {
	e := dynamicEnv(t, "dgx-h100")
	m, _ := e.start(nil)
	ctx := ctxFor(t)
	claim := allocated("x", "gpu-7-mig-1g-10gb-6")
	if _, err := m.Prepare(ctx, claim); err != nil {
		t.Fatal(err)
	}
	old := m.Prepared()["uid-x"].Devices[0].PartitionUUID
	e.bootID = "boot-2"
	m, _ = e.start(nil)
	if n := e.totalPartitions(); n != 0 {
		t.Fatalf("%d partitions after reboot", n)
	}
	if _, err := m.Prepare(ctx, claim); err != nil {
		t.Fatal(err)
	}
	now := m.Prepared()["uid-x"].Devices[0]
	if now.PartitionUUID == "" || now.PartitionUUID == old || !now.CreatedPartition {
		t.Fatalf("after reboot the claim records %+v (old partition %s)", now, old)
	}
	if !strings.Contains(e.spec("uid-x"), now.PartitionUUID) {
		t.Error("spec does not name the new partition")
	}
	if n := e.totalPartitions(); n != 1 {
		t.Errorf("%d partitions, want 1", n)
	}
}

// TestDynamicCorruptCheckpointRebuilt: a dynamic claim rebuilt from its CDI
// spec still owns its partition (the sweep keeps it), destroys it on
// unprepare and turns MIG mode back off.
func TestDynamicCorruptCheckpointRebuilt(t *testing.T) {
	e := dynamicEnv(t, "dgx-h100")
	m, res := e.start(nil)
	ctx := ctxFor(t)
	claim := allocated("x", "gpu-7-mig-1g-10gb-5")
	if _, err := m.Prepare(ctx, claim); err != nil {
		t.Fatal(err)
	}
	e.corruptCheckpoint(`{"checksum":"sha256:00","checkpoint":{`)
	m, _ = e.start(nil)
	if n := e.totalPartitions(); n != 1 {
		t.Fatalf("%d partitions after the rebuild, want the claim's one", n)
	}
	if _, err := m.Prepare(ctx, claim); err != nil {
		t.Fatal(err)
	}
	if err := m.Unprepare(ctx, "uid-x", "default", "x"); err != nil {
		t.Fatal(err)
	}
	if n := e.totalPartitions(); n != 0 {
		t.Errorf("%d partitions after unprepare", n)
	}
	if e.gpuState(res.Devices["gpu-7"].GPU.UUID).Partitioning.Enabled {
		t.Error("MIG mode left on after the rebuilt claim's partition went")
	}
}

// stray adds a StrayCleaner with n half-made partitions on the first GPU
// asked about.
type stray struct {
	backend.Backend
	n     int
	err   error
	asked []string
}

func (s *stray) DestroyStray(_ context.Context, gpu string) (int, error) {
	s.asked = append(s.asked, gpu)
	n := s.n
	s.n = 0
	return n, s.err
}

// TestDynamicStartupDestroysStrays: a backend that can hold half-made
// partitions is asked to destroy them on every dynamic GPU, and they count
// as orphans; a static node never asks.
func TestDynamicStartupDestroysStrays(t *testing.T) {
	for _, p := range []publish.Partitioning{publish.Static, publish.Dynamic} {
		e := newEnv(t, "dgx-h100")
		e.partitioning = p
		var s *stray
		// Two destroyed, then a failure: counted, logged, and the agent starts.
		e.wrap = func(b backend.Backend) backend.Backend { s = &stray{Backend: b, n: 2, err: errFault}; return s }
		orphans := 0
		e.orphanHook = func() { orphans++ }
		e.start(nil)
		want, wantOrphans := 8, 2
		if p == publish.Static {
			want, wantOrphans = 0, 0
		}
		if len(s.asked) != want || orphans != wantOrphans {
			t.Errorf("%s: asked %d GPUs, %d orphans reported; want %d, %d", p, len(s.asked), orphans, want, wantOrphans)
		}
	}
}

// undestroyable refuses to destroy one partition.
type undestroyable struct {
	backend.Backend
	uuid string
}

func (u *undestroyable) DestroyPartition(ctx context.Context, gpu, uuid string) error {
	if uuid == u.uuid {
		return errFault
	}
	return u.Backend.DestroyPartition(ctx, gpu, uuid)
}

// TestDynamicStartupSurvivesUndestroyableOrphan: an orphan that will not go
// is left and logged; the agent starts, the other orphans go, and a claim
// for an overlapping placement fails naming the hardware's refusal.
func TestDynamicStartupSurvivesUndestroyableOrphan(t *testing.T) {
	e := dynamicEnv(t, "dgx-h100-mig")
	m0, err := sim.Profile("dgx-h100-mig", nodeName)
	if err != nil {
		t.Fatal(err)
	}
	stuck := m0.Node.GPUs[6].Partitions[0] // 1g.10gb at 0 on gpu-6
	e.wrap = func(b backend.Backend) backend.Backend { return &undestroyable{Backend: b, uuid: stuck.UUID} }
	m, _ := e.start(nil)
	if n := e.totalPartitions(); n != 1 {
		t.Fatalf("%d partitions after start, want only the stuck one", n)
	}
	_, err = m.Prepare(ctxFor(t), allocated("x", "gpu-6-mig-1g-10gb-0"))
	assertKind(t, err, ErrPartition)
	if err == nil || !strings.Contains(err.Error(), "overlaps partition "+stuck.UUID) {
		t.Errorf("err %v, want one naming the stuck partition", err)
	}
}

// TestHolds: a partition is held by the claim that recorded it and by one
// whose prepare carved it but stopped before recording it; one cut by hand
// is held by nobody, so the driver withholds its slices.
func TestHolds(t *testing.T) {
	e := dynamicEnv(t, "dgx-h100")
	m, res := e.start(crashAt(stepPartitionCarved))
	ctx := ctxFor(t)
	if _, err := m.Prepare(ctx, allocated("x", "gpu-7-mig-1g-10gb-6")); !errors.Is(err, errInjected) {
		t.Fatalf("err %v, want the injected stop", err)
	}
	m.crashHook = nil
	if _, err := m.Prepare(ctx, allocated("y", "gpu-7-mig-3g-40gb-0")); err != nil {
		t.Fatal(err)
	}
	gpu := res.Devices["gpu-7"].GPU.UUID
	if _, err := e.sim.CreatePartition(ctx, gpu, "1g.10gb", inventory.Placement{Start: 4, Size: 1}); err != nil {
		t.Fatal(err)
	}
	g := e.gpuState(gpu)
	want := map[int]bool{6: true, 0: true, 4: false} // by placement start
	if len(g.Partitions) != len(want) {
		t.Fatalf("GPU has %d partitions, want %d", len(g.Partitions), len(want))
	}
	for i := range g.Partitions {
		p := &g.Partitions[i]
		if got := m.Holds(gpu, p); got != want[p.Placement.Start] {
			t.Errorf("Holds(%s at %d) = %v, want %v", p.Profile, p.Placement.Start, got, want[p.Placement.Start])
		}
	}
	// The same placement on another GPU is nobody's.
	other := res.Devices["gpu-6"].GPU.UUID
	if m.Holds(other, &inventory.Partition{UUID: "MIG-elsewhere", Profile: "1g.10gb", Placement: inventory.Placement{Start: 6, Size: 1}}) {
		t.Error("a partition at the carving claim's placement on another GPU is held")
	}
}
