package claims

import (
	"context"
	"testing"
	"time"
)

// TestModeIdleInOtherMode: a GPU left in CPX while the agent runs (set by
// hand, or a rest that failed) with no claim holding it is idle, as the
// window counts it (publish.touched): a CPX partition there takes the
// partition that exists without a mode write, and its release rests the GPU
// in SPX. A whole GPU there sets SPX first (TestModeWholeGPUSetsRest); that
// its slices offer every mode, which the allocator gives, is
// TestModeIdleInOtherModeIsUntouched's (this harness publishes without
// the checkpoint's holds, so every partition counts as held).
func TestModeIdleInOtherMode(t *testing.T) {
	e := modeEnv(t)
	writes := 0
	m, res := e.start(nil)
	m.cfg.ObservePartition = func(op PartitionOp, _ time.Duration, _ error) {
		if op == PartitionMode {
			writes++
		}
	}
	ctx := ctxFor(t)
	gpu := res.Devices["gpu-4"].GPU.UUID
	if err := e.sim.SwitchMode(context.Background(), gpu, "CPX"); err != nil {
		t.Fatal(err)
	}

	if _, err := m.Prepare(ctx, allocated("cpx", "gpu-4-xcp-cpx-2")); err != nil {
		t.Fatal(err)
	}
	if mode, n := e.modeOf(gpu); mode != "CPX" || n != 8 || writes != 0 {
		t.Fatalf("a CPX partition of a GPU in CPX: %s with %d partitions, %d mode writes; want CPX, 8, none", mode, n, writes)
	}
	if err := m.Unprepare(ctx, "uid-cpx", "default", "cpx"); err != nil {
		t.Fatal(err)
	}
	if mode, _ := e.modeOf(gpu); mode != "SPX" {
		t.Fatalf("released, the GPU is in %s, want SPX", mode)
	}

	e.assertClean(t, m)
}
