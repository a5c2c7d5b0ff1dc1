package amdsysfs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/backend"
)

// The health tests run WatchHealth on a copy of a fixture tree and change
// the copy between polls: RAS directories added (no committed fixture has
// one), counts rewritten, a PCI device link removed and put back.

// bound is how long a test waits for something that must happen; nothing
// is asserted on timing.
const bound = 20 * time.Second

// writeRAS writes one block's error count file below a PCI device, as a
// new file renamed into place so a poll never reads it half written.
func writeRAS(t *testing.T, root, bdf, block, content string) {
	t.Helper()
	writeRASAt(t, filepath.Join(root, pciDevicesDir, bdf), block, content)
}

// writeRASAt is writeRAS into the device directory dev.
func writeRASAt(t *testing.T, dev, block, content string) {
	t.Helper()
	dir := filepath.Join(dev, rasDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "."+block+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, block+rasSuffix)); err != nil {
		t.Fatal(err)
	}
}

func counts(ue, ce int) string { return fmt.Sprintf("ue: %d\nce: %d\n", ue, ce) }

// healthRig is a backend on a copied fixture, polling fast, with the
// UUIDs Discover publishes by PCI bus ID.
type healthRig struct {
	t     *testing.T
	root  string
	b     *Backend
	uuid  map[string]string // by PCI bus ID
	mu    sync.Mutex
	polls int

	events chan backend.HealthEvent
	cancel context.CancelFunc
	done   chan error
}

func newHealthRig(t *testing.T, fixtureName string, setup func(root string)) *healthRig {
	t.Helper()
	h := &healthRig{t: t, root: copyTree(t, fixture(fixtureName)), uuid: map[string]string{}}
	if setup != nil {
		setup(h.root)
	}
	logger, ctx := ktesting.NewTestContext(t)
	b, err := New(Options{SysfsRoot: h.root, Logger: logger, HealthPollInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b.healthPolled = func() {
		h.mu.Lock()
		h.polls++
		h.mu.Unlock()
	}
	h.b = b
	n, err := b.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range n.GPUs {
		h.uuid[g.PCIBusID] = g.UUID
	}
	ctx, cancel := context.WithCancel(ctx)
	h.events, h.cancel, h.done = make(chan backend.HealthEvent, 256), cancel, make(chan error, 1)
	go func() { h.done <- b.WatchHealth(ctx, h.events) }()
	t.Cleanup(func() { h.stop() })
	return h
}

// stop cancels the watch and returns what WatchHealth returned.
func (h *healthRig) stop() error {
	h.t.Helper()
	h.cancel()
	select {
	case err := <-h.done:
		h.done <- err
		return err
	case <-time.After(bound):
		h.t.Fatal("WatchHealth did not return after ctx was cancelled")
		return nil
	}
}

// settle returns once a whole poll has run after the call: then every
// event of what the test changed before is in the channel.
func (h *healthRig) settle() {
	h.t.Helper()
	read := func() int {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.polls
	}
	start := read()
	deadline := time.Now().Add(bound)
	for read() < start+2 {
		if time.Now().After(deadline) {
			h.t.Fatal("timed out waiting for two polls")
		}
		time.Sleep(time.Millisecond)
	}
}

func (h *healthRig) none() {
	h.t.Helper()
	select {
	case ev := <-h.events:
		h.t.Errorf("unexpected event %+v", ev)
	default:
	}
}

// expect takes the next event and checks it; msg, when not empty, must be
// in its message.
func (h *healthRig) expect(bdf string, kind backend.HealthKind, count int64, msg string) backend.HealthEvent {
	h.t.Helper()
	select {
	case ev := <-h.events:
		if ev.UUID != h.uuid[bdf] || ev.Kind != kind || ev.Count != count || ev.Time.IsZero() ||
			ev.Message == "" || !strings.Contains(ev.Message, msg) {
			h.t.Errorf("event %+v, want %s (%s) %s count %d, message with %q", ev, h.uuid[bdf], bdf, kind, count, msg)
		}
		return ev
	case <-time.After(bound):
		h.t.Fatalf("no event; want %s %s", bdf, kind)
		return backend.HealthEvent{}
	}
}

const (
	gpuA = "0000:63:00.0"
	gpuB = "0000:e3:00.0"
)

// A non-zero baseline is reported at start; then only changes of the sums
// over blocks, naming the blocks that changed, with the UUIDs Discover
// publishes.
func TestHealthRASCounters(t *testing.T) {
	h := newHealthRig(t, "mi210-pcie", func(root string) {
		writeRAS(t, root, gpuA, "umc", counts(0, 2))
		writeRAS(t, root, gpuA, "gfx", counts(0, 1))
		writeRAS(t, root, gpuA, "sdma", counts(0, 0))
		writeRAS(t, root, gpuB, "umc", counts(0, 0))
	})
	if len(h.uuid) != 2 || h.uuid[gpuA] == "" || h.uuid[gpuB] == "" {
		t.Fatalf("discovered %v", h.uuid)
	}
	h.expect(gpuA, backend.HealthRASCorrectable, 3, "gfx 1, umc 2")
	h.settle()
	h.none()

	// Written one after the other, so perhaps seen by two polls: the
	// uncorrectable one first either way (a poll reports ue before ce).
	writeRAS(t, h.root, gpuB, "sdma", counts(1, 0))
	writeRAS(t, h.root, gpuB, "gfx", counts(0, 1))
	h.expect(gpuB, backend.HealthRASUncorrectable, 1, "sdma 0->1")
	h.expect(gpuB, backend.HealthRASCorrectable, 1, "gfx 0->1")
	h.settle()
	h.none()

	writeRAS(t, h.root, gpuA, "umc", counts(0, 5))
	ev := h.expect(gpuA, backend.HealthRASCorrectable, 6, "6, was 3 (umc 2->5)")
	if strings.Contains(ev.Message, "gfx") {
		t.Errorf("message %q names a block that did not change", ev.Message)
	}
	h.settle()
	h.none()

	// A block that cannot be read, or whose file goes away, keeps its
	// count: no false drop, no event.
	writeRAS(t, h.root, gpuA, "umc", "nonsense\n")
	if err := os.Remove(filepath.Join(h.root, pciDevicesDir, gpuA, rasDir, "gfx"+rasSuffix)); err != nil {
		t.Fatal(err)
	}
	h.settle()
	h.none()
	writeRAS(t, h.root, gpuA, "umc", counts(0, 5))
	writeRAS(t, h.root, gpuA, "gfx", counts(0, 1))
	h.settle()
	h.none()
}

// A GPU reset shows as the counters answering "Query currently
// inaccessible" and readable again: HealthRecovered, and counts from
// before are not reported again. Counters going back down (the driver
// counting from zero) are a reset too, with a new baseline.
func TestHealthRASReset(t *testing.T) {
	h := newHealthRig(t, "mi210-pcie", func(root string) {
		writeRAS(t, root, gpuA, "umc", counts(1, 4))
	})
	h.expect(gpuA, backend.HealthRASUncorrectable, 1, "umc 1")
	h.expect(gpuA, backend.HealthRASCorrectable, 4, "umc 4")

	writeRAS(t, h.root, gpuA, "umc", rasInaccessible+"\n")
	h.settle()
	h.none()
	writeRAS(t, h.root, gpuA, "umc", counts(1, 4))
	h.expect(gpuA, backend.HealthRecovered, 0, "GPU reset")
	h.settle()
	h.none()

	writeRAS(t, h.root, gpuA, "umc", counts(0, 1))
	h.expect(gpuA, backend.HealthRecovered, 0, "umc ue 1->0")
	h.expect(gpuA, backend.HealthRASCorrectable, 1, "umc 1")
	h.settle()
	h.none()
	writeRAS(t, h.root, gpuA, "umc", counts(0, 2))
	h.expect(gpuA, backend.HealthRASCorrectable, 2, "umc 1->2")
}

// A GPU whose PCI device directory disappears is lost, once; when it comes
// back it is recovered and its counters start a new baseline.
func TestHealthRASLostAndBack(t *testing.T) {
	h := newHealthRig(t, "mi210-pcie", func(root string) {
		writeRAS(t, root, gpuB, "umc", counts(0, 0))
	})
	h.settle()
	h.none()

	link := filepath.Join(h.root, pciDevicesDir, gpuB)
	target, err := os.Readlink(link)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	ev := h.expect(gpuB, backend.HealthLost, 0, gpuB)
	if !strings.Contains(ev.Message, "gone") {
		t.Errorf("message %q", ev.Message)
	}
	h.settle()
	h.settle()
	h.none()

	// Back, with errors counted while it was away.
	writeRASAt(t, filepath.Join(filepath.Dir(link), target), "umc", counts(0, 3))
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	h.expect(gpuB, backend.HealthRecovered, 0, "is back")
	h.expect(gpuB, backend.HealthRASCorrectable, 3, "umc 3")
	h.settle()
	h.none()
}

// GPUs without RAS counters, and a capture without PCI directories at all
// (the real MI308X KFD capture), report nothing, and are never lost.
func TestHealthRASAbsent(t *testing.T) {
	for _, name := range []string{"mi210-pcie", "mi308x-cpx"} {
		t.Run(name, func(t *testing.T) {
			h := newHealthRig(t, name, nil)
			h.settle()
			h.settle()
			h.none()
			if err := h.stop(); err != nil {
				t.Errorf("WatchHealth returned %v, want nil", err)
			}
		})
	}
}
