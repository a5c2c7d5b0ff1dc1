package publish_test

import (
	"context"
	"slices"
	"testing"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// TestModeIdleInOtherModeIsUntouched: GPUs left in CPX with no partition
// held (by an operator, or a rest the agent could not set) are idle for the
// placement window: with a window of 2 only two of them publish their
// placements, 8 whole + 2·14 = 36 devices rather than every GPU's 120. What
// they publish is what prepare does there, checked with the real
// allocator: an open one gives a QPX partition (prepare changes the mode,
// no claim holding the GPU), a closed one its whole GPU (prepare sets SPX).
// Once a partition is held, its GPU is touched and open beside the window's
// two; before the checkpoint is read (Held nil) every GPU with partitions
// counts as touched.
func TestModeIdleInOtherModeIsUntouched(t *testing.T) {
	ctx := context.Background()
	n := newModeNode(t)
	for _, g := range n.inv.GPUs {
		if err := n.hw.SwitchMode(ctx, g.UUID, "CPX"); err != nil {
			t.Fatal(err)
		}
	}
	n.discover()

	unread := publish.Options{Partitioning: publish.Dynamic, Window: 2}
	res, err := publish.Build(n.node, n.inv, unread)
	if err != nil {
		t.Fatal(err)
	}
	if open := openNames(res); len(open) != 8 {
		t.Errorf("before the checkpoint is read, open %v; want all 8 (every partition counts as held)", open)
	}

	// A node where the agent never ran: the window opens from a build where
	// no GPU was open.
	first := n.options(unread)
	first.Open = func(string) bool { return false }
	if n.win, err = publish.Build(n.node, n.inv, first); err != nil {
		t.Fatal(err)
	}
	c := n.publish(2)
	if open := openNames(n.win); len(open) != 2 || len(n.win.Devices) != 36 {
		t.Fatalf("idle GPUs in CPX: open %v, %d devices; want 2 open, 36 devices", open, len(n.win.Devices))
	}
	for _, w := range n.win.Window {
		if w.Touched {
			t.Errorf("%s counted touched with no partition held", w.Name)
		}
	}

	qpx, err := c.Allocate(ctx, n.node, xcpClaim("qpx", "QPX", 1))
	if err != nil || qpx == nil {
		t.Fatalf("a QPX partition of an idle GPU in CPX: %v, %v", qpx, err)
	}
	qgpu := modeGPU(alloctest.Devices(qpx[0])[0])
	if !n.win.Open[qgpu] {
		t.Errorf("QPX partition %v on %s, outside the window %v", alloctest.Devices(qpx[0]), qgpu, openNames(n.win))
	}
	whole, err := c.Allocate(ctx, n.node, amdWholeClaim("whole"))
	if err != nil || whole == nil {
		t.Fatalf("a whole GPU in CPX: %v, %v", whole, err)
	}

	// As the agent: the QPX claim prepared (its GPU set to QPX, the whole
	// one's to SPX), then republished.
	for _, r := range [][]string{alloctest.Devices(qpx[0]), alloctest.Devices(whole[0])} {
		for _, d := range r {
			n.held[d] = true
		}
	}
	if changed := n.settle(); changed < 2 {
		t.Fatalf("%d GPUs changed mode, want the QPX claim's and the whole GPU's", changed)
	}
	n.publish(2)
	touchedNow := slices.IndexFunc(n.win.Window, func(w publish.WindowGPU) bool { return w.Name == qgpu })
	if touchedNow < 0 || !n.win.Window[touchedNow].Touched || !n.win.Open[qgpu] {
		t.Errorf("the GPU of the held QPX partition: %+v, open %v; want touched and open", n.win.Window, n.win.Open[qgpu])
	}
	if open := openNames(n.win); len(open) != 3 {
		t.Errorf("open %v: want the touched GPU and two idle ones", open)
	}
}

// openNames is the GPUs res publishes placements of, sorted.
func openNames(res *publish.Result) []string {
	var out []string
	for name, open := range res.Open {
		if open {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
