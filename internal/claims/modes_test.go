package claims

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/sim"
)

// modeEnv is an mi300x-8 node partitioned dynamically whose mode changes
// are done at once (the wait for one is TestModeChangeWaitsForPartitions').
func modeEnv(t testing.TB) *env {
	e := dynamicEnv(t, "mi300x-8")
	e.machine = func(m *sim.Machine) { m.ModeChangeTime = nil }
	return e
}

// modeOf is GPU uuid's mode and partition count as the hardware has them.
func (e *env) modeOf(uuid string) (string, int) {
	g := e.gpuState(uuid)
	return g.Partitioning.Mode, len(g.Partitions)
}

// TestModePrepareSwitchesAndUnprepareRests walks one GPU through the
// cases: the first CPX partition sets CPX, a second one on the same GPU
// changes nothing, a DPX half is refused while a CPX one is held, the GPU
// stays in CPX until the last CPX partition goes, then rests in SPX; a DPX
// half then sets DPX, and a whole GPU elsewhere changes nothing.
func TestModePrepareSwitchesAndUnprepareRests(t *testing.T) {
	e := modeEnv(t)
	modeWrites := 0
	m, res := e.start(nil)
	m.cfg.ObservePartition = func(op PartitionOp, _ time.Duration, _ error) {
		if op == PartitionMode {
			modeWrites++
		}
	}
	ctx := ctxFor(t)
	gpu := res.Devices["gpu-0"].GPU.UUID
	if mode, n := e.modeOf(gpu); mode != "SPX" || n != 0 {
		t.Fatalf("power-on: %s with %d partitions, want SPX with none", mode, n)
	}

	if _, err := m.Prepare(ctx, allocated("a", "gpu-0-xcp-cpx-3")); err != nil {
		t.Fatal(err)
	}
	if mode, n := e.modeOf(gpu); mode != "CPX" || n != 8 || modeWrites != 1 {
		t.Fatalf("after the first CPX partition: %s with %d partitions, %d mode writes; want CPX, 8, 1", mode, n, modeWrites)
	}
	rec := m.cp.Claims["uid-a"].Devices[0]
	var at3 inventory.Partition
	for _, p := range e.gpuState(gpu).Partitions {
		if p.Placement.Start == 3 {
			at3 = p
		}
	}
	if rec.PartitionUUID != at3.UUID || !rec.CreatedPartition {
		t.Errorf("recorded %+v, want partition %s at 3", rec, at3.UUID)
	}
	if !strings.Contains(e.spec("uid-a"), "renderD") {
		t.Errorf("spec has no render node: %s", e.spec("uid-a"))
	}

	if _, err := m.Prepare(ctx, allocated("b", "gpu-0-xcp-cpx-5")); err != nil {
		t.Fatal(err)
	}
	if modeWrites != 1 {
		t.Errorf("a second CPX partition wrote the mode again (%d writes)", modeWrites)
	}

	// A placement overlapping a held one is refused by the device check;
	// one that does not (QPX at 0-1 beside CPX at 3 and 5) by the mode.
	if _, err := m.Prepare(ctx, allocated("half", "gpu-0-xcp-dpx-0")); !errors.Is(err, ErrDeviceInUse) {
		t.Fatalf("DPX over a held CPX partition: %v", err)
	}
	_, err := m.Prepare(ctx, allocated("quarter", "gpu-0-xcp-qpx-0"))
	if !errors.Is(err, ErrDeviceInUse) || !strings.Contains(err.Error(), "is in partition mode CPX and claim uid-a holds a device of it: the mode cannot change to QPX until it is released") {
		t.Fatalf("QPX beside CPX: %v", err)
	}
	if mode, n := e.modeOf(gpu); mode != "CPX" || n != 8 {
		t.Fatalf("after the refusal: %s with %d partitions", mode, n)
	}

	if err := m.Unprepare(ctx, "uid-a", "default", "a"); err != nil {
		t.Fatal(err)
	}
	if mode, _ := e.modeOf(gpu); mode != "CPX" {
		t.Fatalf("claim b still holds a CPX partition, but the GPU is in %s", mode)
	}
	if err := m.Unprepare(ctx, "uid-b", "default", "b"); err != nil {
		t.Fatal(err)
	}
	e.assertClean(t, m)
	if mode, _ := e.modeOf(gpu); mode != "SPX" || modeWrites != 2 {
		t.Fatalf("after the last partition: %s, %d mode writes; want SPX, 2", mode, modeWrites)
	}

	if _, err := m.Prepare(ctx, allocated("half", "gpu-0-xcp-dpx-4")); err != nil {
		t.Fatal(err)
	}
	if mode, n := e.modeOf(gpu); mode != "DPX" || n != 2 {
		t.Fatalf("after a DPX half: %s with %d partitions", mode, n)
	}
	if _, err := m.Prepare(ctx, allocated("whole", "gpu-1")); err != nil {
		t.Fatal(err)
	}
	if modeWrites != 3 {
		t.Errorf("%d mode writes, want 3: a whole GPU at rest needs none", modeWrites)
	}
	for _, uid := range []string{"half", "whole"} {
		if err := m.Unprepare(ctx, "uid-"+uid, "default", uid); err != nil {
			t.Fatal(err)
		}
	}
	e.assertClean(t, m)
}

// TestModeWholeGPUSetsRest: a whole GPU prepared on a GPU left in another
// mode that no claim holds (set by hand) sets it back to SPX first.
func TestModeWholeGPUSetsRest(t *testing.T) {
	e := modeEnv(t)
	_, res := e.start(nil)
	gpu := res.Devices["gpu-2"].GPU.UUID
	if err := e.sim.SwitchMode(context.Background(), gpu, "QPX"); err != nil {
		t.Fatal(err)
	}
	// The start-up sweep brings a GPU no claim holds back to rest.
	m, _ := e.start(nil)
	if mode, _ := e.modeOf(gpu); mode != "SPX" {
		t.Fatalf("start-up left a GPU no claim holds in %s", mode)
	}
	if err := e.sim.SwitchMode(context.Background(), gpu, "QPX"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Prepare(ctxFor(t), allocated("whole", "gpu-2")); err != nil {
		t.Fatal(err)
	}
	if mode, n := e.modeOf(gpu); mode != "SPX" || n != 0 {
		t.Fatalf("whole GPU prepared in %s with %d partitions", mode, n)
	}
}

// TestModeCrashAtEveryStep stops the agent at each step of a prepare that
// changes the mode, restarts it and checks the node: before
// PrepareCompleted the restart brings the GPU back to SPX; after it the
// claim keeps its CPX partition. The kubelet's retry then prepares it, and
// the unprepare rests the GPU.
func TestModeCrashAtEveryStep(t *testing.T) {
	steps := []crashStep{stepPrepareStarted, stepPartitionCarved, stepSpecWritten, stepPrepareCompleted}
	for _, step := range steps {
		t.Run(string(step), func(t *testing.T) {
			e := modeEnv(t)
			m, res := e.start(crashAt(step))
			gpu := res.Devices["gpu-4"].GPU.UUID
			ctx := ctxFor(t)
			claim := allocated("x", "gpu-4-xcp-qpx-2", "gpu-4-xcp-qpx-6")
			if _, err := m.Prepare(ctx, claim); !errors.Is(err, errInjected) {
				t.Fatalf("err %v, want the injected stop", err)
			}
			m, _ = e.start(nil)
			if mode, _ := e.modeOf(gpu); step == stepPrepareCompleted != (mode == "QPX") {
				t.Fatalf("after restart: GPU in %s", mode)
			}
			if step != stepPrepareCompleted {
				e.assertClean(t, m)
			}
			if _, err := m.Prepare(ctx, claim); err != nil {
				t.Fatalf("retry: %v", err)
			}
			if mode, n := e.modeOf(gpu); mode != "QPX" || n != 4 {
				t.Fatalf("after retry: %s with %d partitions", mode, n)
			}
			if err := m.Unprepare(ctx, "uid-x", "default", "x"); err != nil {
				t.Fatal(err)
			}
			e.assertClean(t, m)
		})
	}
}

// TestModeRebootPreparesAgain: after a reboot the GPU is back in SPX; the
// prepared claim's partition is gone, and the kubelet's prepare sets the
// mode again.
func TestModeRebootPreparesAgain(t *testing.T) {
	e := modeEnv(t)
	m, res := e.start(nil)
	gpu := res.Devices["gpu-0"].GPU.UUID
	ctx := ctxFor(t)
	claim := allocated("a", "gpu-0-xcp-cpx-1")
	if _, err := m.Prepare(ctx, claim); err != nil {
		t.Fatal(err)
	}
	e.bootID = "boot-2"
	m, _ = e.start(nil)
	if mode, _ := e.modeOf(gpu); mode != "SPX" {
		t.Fatalf("after reboot: %s", mode)
	}
	if _, err := m.Prepare(ctx, claim); err != nil {
		t.Fatal(err)
	}
	if mode, n := e.modeOf(gpu); mode != "CPX" || n != 8 {
		t.Fatalf("prepared again: %s with %d partitions", mode, n)
	}
	if err := m.Unprepare(ctx, "uid-a", "default", "a"); err != nil {
		t.Fatal(err)
	}
	e.assertClean(t, m)
}

// TestModeChangeWaitsForPartitions: the new mode's partitions appear the
// machine's mode change time (2 s on mi300x-8) after the write; prepare
// waits for them on the manager's clock, which the test steps, and gives up
// after the timeout.
func TestModeChangeWaitsForPartitions(t *testing.T) {
	e := dynamicEnv(t, "mi300x-8")
	e.clock = testingclock.NewFakeClock(time.Unix(1_000_000, 0))
	m, res := e.start(nil)
	ctx := ctxFor(t)
	done := make(chan error, 1)
	go func() {
		_, err := m.Prepare(ctx, allocated("a", "gpu-0-xcp-cpx-0"))
		done <- err
	}()
	var waited time.Duration
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if waited < 2*time.Second {
				t.Fatalf("prepared after %v of a 2s mode change", waited)
			}
			goto timeout
		default:
		}
		if e.clock.HasWaiters() {
			e.clock.Step(modePollInterval)
			waited += modePollInterval
		}
		runtime.Gosched()
	}
timeout:
	// A change that never finishes: the prepare fails after the timeout,
	// and its rollback rests the GPU.
	m.cfg.ModeChangeTimeout = time.Second
	e.sim.Machine().ModeChangeTime[res.Devices["gpu-1"].GPU.UUID] = time.Hour
	go func() {
		_, err := m.Prepare(ctx, allocated("b", "gpu-1-xcp-dpx-0"))
		done <- err
	}()
	for {
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "no DPX partition at 0 1s after the mode was set") {
				t.Fatalf("never-finishing change: %v", err)
			}
			if mode, n := e.modeOf(res.Devices["gpu-1"].GPU.UUID); mode != "SPX" || n != 0 {
				t.Fatalf("after the failed prepare's rollback: %s with %d partitions, want SPX", mode, n)
			}
			return
		default:
		}
		if e.clock.HasWaiters() {
			e.clock.Step(modePollInterval)
		}
		runtime.Gosched()
	}
}
