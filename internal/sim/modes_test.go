package sim

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// modeBackend starts mi300x-8 (2 s mode changes) on a fake clock.
func modeBackend(t *testing.T, m *Machine, dir string, clk *testingclock.FakeClock) *Backend {
	t.Helper()
	b, err := New(m, dir, WithBootID("boot-1"), testLogger(t), WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gpuOf(t *testing.T, b *Backend, uuid string) inventory.GPU {
	t.Helper()
	for _, g := range discover(t, b).GPUs {
		if g.UUID == uuid {
			return g
		}
	}
	t.Fatalf("no GPU %s", uuid)
	return inventory.GPU{}
}

func nodeExists(t *testing.T, b *Backend, path string) bool {
	t.Helper()
	_, err := os.Lstat(filepath.Join(b.DevRoot(), path))
	return err == nil
}

// TestSwitchModeTakesTime: a mode change is a write that returns at once;
// the old partitions go then, and the new ones appear, with their nodes,
// once the modelled time has passed, not before.
func TestSwitchModeTakesTime(t *testing.T) {
	ctx := context.Background()
	clk := testingclock.NewFakeClock(time.Unix(1_000_000, 0))
	m := mustProfile(t, "mi300x-8")
	if d := m.ModeChangeTime[m.Node.GPUs[0].UUID]; d != 2*time.Second {
		t.Fatalf("mi300x-8 mode change takes %v, the catalogue says 2s", d)
	}
	b := modeBackend(t, m, t.TempDir(), clk)
	gpu := m.Node.GPUs[0].UUID
	if g := gpuOf(t, b, gpu); g.Partitioning.Mode != "SPX" || g.Partitioning.MemoryMode != "NPS1" || len(g.Partitioning.Profiles) != 4 {
		t.Fatalf("power-on: mode %q memory %q, %d modes; want SPX, NPS1, 4", g.Partitioning.Mode, g.Partitioning.MemoryMode, len(g.Partitioning.Profiles))
	}
	gen0, _ := b.Generation()

	if err := b.SwitchMode(ctx, gpu, "CPX"); err != nil {
		t.Fatal(err)
	}
	g := gpuOf(t, b, gpu)
	if g.Partitioning.Mode != "CPX" || !g.Partitioning.Enabled || len(g.Partitions) != 0 {
		t.Fatalf("right after the write: mode %s enabled %v, %d partitions; want CPX, true, none yet", g.Partitioning.Mode, g.Partitioning.Enabled, len(g.Partitions))
	}
	gen1, _ := b.Generation()
	if gen1 == gen0 || nodeExists(t, b, "dri/renderD136") {
		t.Fatalf("generation %s -> %s, renderD136 there %v: the write must show, its partitions not", gen0, gen1, nodeExists(t, b, "dri/renderD136"))
	}
	clk.Step(2*time.Second - time.Nanosecond)
	if n := len(gpuOf(t, b, gpu).Partitions); n != 0 {
		t.Fatalf("%d partitions a nanosecond before the change is done", n)
	}
	clk.Step(time.Nanosecond)
	g = gpuOf(t, b, gpu)
	if len(g.Partitions) != 8 {
		t.Fatalf("%d partitions when the change is done, want 8", len(g.Partitions))
	}
	for k, p := range g.Partitions {
		card, render := 8+k, 135+k
		if k == 0 {
			card, render = 1, 128
		}
		if p.Profile != "CPX" || p.Placement != (inventory.Placement{Start: k, Size: 1}) || p.Minor != card || p.RenderMinor != render || p.MemoryPartitionMode != "NPS1" || p.ComputeUnits != 38 {
			t.Errorf("partition %d: %+v, want CPX at %d on card%d renderD%d", k, p, k, card, render)
		}
		if !nodeExists(t, b, fmt.Sprintf("dri/renderD%d", render)) {
			t.Errorf("partition %d: no renderD%d node", k, render)
		}
		if maj, min, ok := b.DeviceNumbers(fmt.Sprintf("/dev/dri/renderD%d", render)); !ok || maj != 123 || min != int64(render) {
			t.Errorf("DeviceNumbers(renderD%d) = %d:%d %v", render, maj, min, ok)
		}
	}
	if gen2, _ := b.Generation(); gen2 == gen1 {
		t.Error("generation did not move when the partitions appeared")
	}
	// Setting the mode it is in changes nothing.
	if err := b.SwitchMode(ctx, gpu, "CPX"); err != nil || len(gpuOf(t, b, gpu).Partitions) != 8 {
		t.Fatalf("setting CPX again: %v", err)
	}

	// Back to SPX: the partitions' own nodes go, the GPU's stay.
	if err := b.SwitchMode(ctx, gpu, "SPX"); err != nil {
		t.Fatal(err)
	}
	g = gpuOf(t, b, gpu)
	if g.Partitioning.Mode != "SPX" || g.Partitioning.Enabled || len(g.Partitions) != 0 {
		t.Fatalf("after SPX: %+v", g.Partitioning)
	}
	if nodeExists(t, b, "dri/renderD136") || !nodeExists(t, b, "dri/renderD128") || !nodeExists(t, b, "dri/card1") {
		t.Error("SPX: partition 1's node left, or the GPU's own removed")
	}
	clk.Step(2 * time.Second)
	if n := len(gpuOf(t, b, gpu).Partitions); n != 0 {
		t.Errorf("SPX has %d partitions", n)
	}
	// Another GPU's minors never move.
	if g := gpuOf(t, b, m.Node.GPUs[1].UUID); g.RenderMinor != 129 || g.Minor != 2 {
		t.Errorf("GPU 1 on card%d renderD%d", g.Minor, g.RenderMinor)
	}
}

// TestSwitchModeRefuses: what the driver refuses changes nothing.
func TestSwitchModeRefuses(t *testing.T) {
	ctx := context.Background()
	clk := testingclock.NewFakeClock(time.Unix(1_000_000, 0))

	nps4 := mustLoad(t, strings.Replace(readFile(t, "catalog/mi300x-8.yaml"), "memoryMode: NPS1 ", "memoryMode: NPS4 ", 1), "gpus:\n"+
		"  - {type: mi300x, pciBusID: \"0000:0c:00.0\", partitioningEnabled: true, partitions: [{profile: QPX, start: 0}, {profile: QPX, start: 2}, {profile: QPX, start: 4}, {profile: QPX, start: 6}]}\n"+
		"  - {type: mi300x, pciBusID: \"0000:22:00.0\", partitioningEnabled: true, partitions: [{profile: CPX, start: 0}, {profile: CPX, start: 1}, {profile: CPX, start: 2}, {profile: CPX, start: 3}, {profile: CPX, start: 4}, {profile: CPX, start: 5}, {profile: CPX, start: 6}, {profile: CPX, start: 7}]}\n")
	b := modeBackend(t, nps4, t.TempDir(), clk)
	gpu := nps4.Node.GPUs[0].UUID
	if err := b.SwitchMode(ctx, gpu, "SPX"); err == nil || !strings.Contains(err.Error(), `mode "SPX" cannot be set under memory mode NPS4 (it can be: QPX, CPX)`) {
		t.Errorf("SPX under NPS4: %v", err)
	}
	if g := gpuOf(t, b, gpu); g.Partitioning.Mode != "QPX" || len(g.Partitions) != 4 {
		t.Errorf("after a refused change: mode %s, %d partitions", g.Partitioning.Mode, len(g.Partitions))
	}

	// A partition a process outside the driver holds keeps the mode.
	dir := t.TempDir()
	b = modeBackend(t, nps4, dir, clk)
	held := gpuOf(t, b, gpu).Partitions[2].UUID
	if err := EditState(dir, gpu, func(s *GPUState) { s.InUse = []string{held} }); err != nil {
		t.Fatal(err)
	}
	b = modeBackend(t, nps4, dir, clk)
	if err := b.SwitchMode(ctx, gpu, "CPX"); err == nil || !strings.Contains(err.Error(), "partition "+held+" is in use by a process outside the driver, so the mode cannot change from QPX to CPX") {
		t.Errorf("busy GPU: %v", err)
	}

	h100, _ := newBackend(t, mustProfile(t, "dgx-h100"))
	if err := h100.SwitchMode(ctx, h100.machine.Node.GPUs[0].UUID, "CPX"); err == nil || !strings.Contains(err.Error(), "has no partition modes") {
		t.Errorf("H100: %v", err)
	}
	if err := b.SwitchMode(ctx, "nope", "CPX"); err == nil || !strings.Contains(err.Error(), `no GPU with UUID "nope"`) {
		t.Errorf("unknown GPU: %v", err)
	}
}

// TestModeChangeOutlivesTheProcess: a change under way is in the state; a
// new process (an agent restart) sees it finish on time, a reboot drops it.
func TestModeChangeOutlivesTheProcess(t *testing.T) {
	ctx := context.Background()
	clk := testingclock.NewFakeClock(time.Unix(1_000_000, 0))
	m := mustProfile(t, "mi300x-8")
	dir := t.TempDir()
	gpu := m.Node.GPUs[3].UUID
	if err := modeBackend(t, m, dir, clk).SwitchMode(ctx, gpu, "DPX"); err != nil {
		t.Fatal(err)
	}
	again := modeBackend(t, m, dir, clk)
	if g := gpuOf(t, again, gpu); g.Partitioning.Mode != "DPX" || len(g.Partitions) != 0 {
		t.Fatalf("restarted mid-change: mode %s, %d partitions", g.Partitioning.Mode, len(g.Partitions))
	}
	clk.Step(2 * time.Second)
	g := gpuOf(t, again, gpu)
	if len(g.Partitions) != 2 || g.Partitions[1].Placement != (inventory.Placement{Start: 4, Size: 4}) || g.Partitions[1].RenderMinor != 157 {
		t.Fatalf("DPX done: %+v", g.Partitions)
	}
	rebooted, err := New(m, dir, WithBootID("boot-2"), testLogger(t), WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	if g := gpuOf(t, rebooted, gpu); g.Partitioning.Mode != "SPX" || len(g.Partitions) != 0 {
		t.Errorf("after a reboot: mode %s, %d partitions; want SPX, none", g.Partitioning.Mode, len(g.Partitions))
	}
}

// TestModeSettingsChecked: the loader refuses mode settings that cannot be.
func TestModeSettingsChecked(t *testing.T) {
	base := readFile(t, "catalog/mi300x-8.yaml")
	tests := []struct {
		name, from, to, gpus, want string
	}{
		{name: "unknown compute mode", from: "NPS2: [DPX]", to: "NPS2: [DPX, HPX]", want: `computeModes.NPS2[1]: mode "HPX" is not in profile table mi300x-xcp`},
		{name: "memory mode without its modes", from: "memoryMode: NPS1 ", to: "memoryMode: NPS8 ", want: `memoryMode: "NPS8" is not among computeModes' memory modes (NPS1, NPS2, NPS4)`},
		{name: "not a memory mode", from: "memoryMode: NPS1 ", to: "memoryMode: nps1 ", want: `"nps1" is not a memory partition mode`},
		{name: "bad duration", from: "modeChangeTime: 2s", to: "modeChangeTime: soon", want: `modeChangeTime: "soon" is not a duration of 0 or more`},
		{name: "whole under a memory mode without it", from: "memoryMode: NPS1 ", to: "memoryMode: NPS4 ",
			want: "starts whole, but no whole mode (a profile of one placement) is allowed under memory mode NPS4 (QPX, CPX): list its partitions"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := strings.Replace(base, tc.from, tc.to, 1)
			if data == base {
				t.Fatalf("%q not in the catalogue file", tc.from)
			}
			_, err := LoadMachine("x.yaml", []byte(data), "node-a")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
	// MIG has no modes.
	_, err := LoadMachine("x.yaml", tiny(16, `    partitioning: {kind: mig, enabled: true, memorySlices: 8, computeSlices: 7, profiles: t, memoryMode: NPS1}`), "n")
	if err == nil || !strings.Contains(err.Error(), "memoryMode, computeModes and modeChangeTime are for partitions that are a GPU-wide mode (xcp), not mig") {
		t.Errorf("MIG with a memory mode: %v", err)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// mustLoad loads a catalogue file with its gpus list replaced.
func mustLoad(t *testing.T, file, gpus string) *Machine {
	t.Helper()
	i, j := strings.Index(file, "\ngpus:\n"), strings.Index(file, "\nlinks:\n")
	if i < 0 || j < i {
		t.Fatal("no gpus list")
	}
	m, err := LoadMachine("m.yaml", []byte(file[:i+1]+gpus+file[j+1:]), "node-a")
	if err != nil {
		t.Fatal(err)
	}
	return m
}
