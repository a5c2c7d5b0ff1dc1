//go:build cgo && linux

package nvml

import (
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/backend"
)

// fastPoll drives the counter polls in tests; eventsOnly leaves only the
// first poll (the baseline), so what arrives later came from the event set.
const (
	fastPoll   = 5 * time.Millisecond
	eventsOnly = time.Hour
)

// healthMachine is two H100s with the health lab, a backend polling at
// the given interval, and the UUIDs Discover publishes for them.
func healthMachine(t *testing.T, poll time.Duration) (*healthLab, *Backend, []string) {
	t.Helper()
	s, root := newMachine(t, gpus.Multiple(2, gpus.H100_SXM5_80GB), dgxSlots()[:2])
	lab := newHealthLab(t, s)
	b, err := New(Options{Lib: s, SysfsRoot: root, Logger: ktesting.NewLogger(t, ktesting.NewConfig()), HealthPollInterval: poll})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	_, ctx := ktesting.NewTestContext(t)
	n, err := b.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var uuids []string
	for _, g := range n.GPUs {
		uuids = append(uuids, g.UUID)
	}
	if len(uuids) != 2 {
		t.Fatalf("discovered %d GPUs, want 2", len(uuids))
	}
	return lab, b, uuids
}

// XID, single- and double-bit ECC events arrive through the event set with
// the UUIDs Discover publishes; ECC events carry the volatile total. Each
// GPU is registered for the watched types it supports, and only those.
func TestHealthEventSet(t *testing.T) {
	lab, b, uuid := healthMachine(t, eventsOnly)
	lab.set(1, func(g *labGPU) {
		g.supported = nvml.EventTypeXidCriticalError | nvml.EventTypePState
	})
	w := startWatch(t, b)

	lab.event(0, nvml.EventTypeXidCriticalError, 79, noInstance, noInstance)
	w.expect(backend.HealthEvent{UUID: uuid[0], Kind: backend.HealthXID, Code: 79})

	lab.set(0, func(g *labGPU) { g.sbe = 2 })
	lab.event(0, nvml.EventTypeSingleBitEccError, 0, noInstance, noInstance)
	w.expect(backend.HealthEvent{UUID: uuid[0], Kind: backend.HealthECCSingleBit, Count: 2})

	lab.set(0, func(g *labGPU) { g.dbe = 1 })
	lab.event(0, nvml.EventTypeDoubleBitEccError, 0, noInstance, noInstance)
	got := w.expect(backend.HealthEvent{UUID: uuid[0], Kind: backend.HealthECCDoubleBit, Count: 1})
	if !strings.Contains(got[0].Message, "uncorrected") {
		t.Errorf("message %q", got[0].Message)
	}

	lab.event(1, nvml.EventTypeXidCriticalError, 48, noInstance, noInstance)
	w.expect(backend.HealthEvent{UUID: uuid[1], Kind: backend.HealthXID, Code: 48})

	set := lab.lastSet()
	set.mu.Lock()
	reg := map[*server.Device]uint64{}
	for d, m := range set.registered {
		reg[d] = m
	}
	set.mu.Unlock()
	if want := uint64(watchedEvents); reg[lab.gpus[0].d] != want {
		t.Errorf("GPU 0 registered for 0x%x, want 0x%x", reg[lab.gpus[0].d], want)
	}
	if want := uint64(nvml.EventTypeXidCriticalError); reg[lab.gpus[1].d] != want {
		t.Errorf("GPU 1 registered for 0x%x, want 0x%x (XID only: no ECC events, no PState)", reg[lab.gpus[1].d], want)
	}
}

// An XID that names a GPU instance goes to that MIG device's UUID (the
// partition's, as Discover publishes it); one that names none goes to the
// whole GPU.
func TestHealthXIDOnMIGDevice(t *testing.T) {
	r := h100Rig(t, true)
	lab := newHealthLab(t, r.s)
	small := r.create(t, "1g.10gb", 0)
	big := r.create(t, "3g.40gb", 4)
	w := startWatch(t, r.b)

	lab.event(0, nvml.EventTypeXidCriticalError, 94, uint32(big.GPUInstanceID), uint32(big.ComputeInstanceID))
	w.expect(backend.HealthEvent{UUID: big.UUID, Kind: backend.HealthXID, Code: 94})
	lab.event(0, nvml.EventTypeXidCriticalError, 31, uint32(small.GPUInstanceID), noInstance)
	w.expect(backend.HealthEvent{UUID: small.UUID, Kind: backend.HealthXID, Code: 31})
	lab.event(0, nvml.EventTypeXidCriticalError, 79, noInstance, noInstance)
	w.expect(backend.HealthEvent{UUID: r.gpu, Kind: backend.HealthXID, Code: 79})
	// A GPU instance that has no MIG device (gone since): the whole GPU.
	lab.event(0, nvml.EventTypeXidCriticalError, 43, 13, noInstance)
	w.expect(backend.HealthEvent{UUID: r.gpu, Kind: backend.HealthXID, Code: 43})
}

// Polled counters: a non-zero baseline is reported at start, then only
// changes, in both directions for the pending flags.
func TestHealthCounterChanges(t *testing.T) {
	lab, b, uuid := healthMachine(t, fastPoll)
	lab.set(0, func(g *labGPU) { g.sbe, g.remapPending = 3, true })
	lab.set(1, func(g *labGPU) { g.pageRet = nvml.SUCCESS }) // a GPU with page retirement
	w := startWatch(t, b)

	w.expect(
		backend.HealthEvent{UUID: uuid[0], Kind: backend.HealthECCSingleBit, Count: 3},
		backend.HealthEvent{UUID: uuid[0], Kind: backend.HealthRowRemapPending, Count: 1},
	)
	lab.settle()
	w.none()

	lab.set(1, func(g *labGPU) { g.dbe, g.sbe, g.pagesPending = 2, 7, true })
	lab.set(0, func(g *labGPU) { g.remapPending, g.remapFailed = false, true })
	w.expect(
		backend.HealthEvent{UUID: uuid[0], Kind: backend.HealthRowRemapPending, Count: 0},
		backend.HealthEvent{UUID: uuid[0], Kind: backend.HealthRowRemapFailed, Count: 1},
		backend.HealthEvent{UUID: uuid[1], Kind: backend.HealthECCSingleBit, Count: 7},
		backend.HealthEvent{UUID: uuid[1], Kind: backend.HealthECCDoubleBit, Count: 2},
		backend.HealthEvent{UUID: uuid[1], Kind: backend.HealthRetiredPagesPending, Count: 1},
	)
	lab.settle()
	w.none()

	// An SBE event after the poll already reported the count adds nothing.
	lab.event(1, nvml.EventTypeSingleBitEccError, 0, noInstance, noInstance)
	lab.set(1, func(g *labGPU) { g.pagesPending = false })
	w.expect(backend.HealthEvent{UUID: uuid[1], Kind: backend.HealthRetiredPagesPending, Count: 0})
	lab.settle()
	w.none()
}

// NOT_SUPPORTED counters and event types are skipped silently and not read
// again; a GPU that refuses event registration, and a host without event
// sets, are still polled.
func TestHealthNotSupported(t *testing.T) {
	lab, b, uuid := healthMachine(t, fastPoll)
	lab.set(0, func(g *labGPU) {
		g.eccRet, g.remapRet = nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_NOT_SUPPORTED
		g.supportedRet = nvml.ERROR_NOT_SUPPORTED
	})
	lab.set(1, func(g *labGPU) { g.registerRet = nvml.ERROR_UNKNOWN })
	w := startWatch(t, b)
	lab.settle()
	lab.settle()
	w.none()
	if n := lab.calls(0, "ecc"); n != 2 {
		t.Errorf("GPU 0: %d ECC reads, want 2 (corrected and uncorrected, once each)", n)
	}
	if n := lab.calls(0, "remap"); n != 1 {
		t.Errorf("GPU 0: %d row-remap reads, want 1", n)
	}

	lab.set(1, func(g *labGPU) { g.dbe = 1 })
	w.expect(backend.HealthEvent{UUID: uuid[1], Kind: backend.HealthECCDoubleBit, Count: 1})
	lab.set(0, func(g *labGPU) { g.dbe = 4 }) // unsupported: never read
	lab.settle()
	w.none()
}

func TestHealthWithoutEventSet(t *testing.T) {
	lab, b, uuid := healthMachine(t, fastPoll)
	lab.mu.Lock()
	lab.createRet = nvml.ERROR_NOT_SUPPORTED
	lab.mu.Unlock()
	w := startWatch(t, b)
	lab.set(0, func(g *labGPU) { g.remapFailed = true })
	w.expect(backend.HealthEvent{UUID: uuid[0], Kind: backend.HealthRowRemapFailed, Count: 1})
	if err := w.stop(); err != nil {
		t.Errorf("WatchHealth: %v", err)
	}
}

// A lost GPU is reported once, naming the call, then only probed: its
// counters are not read and it leaves the event set. When it answers
// again it is reported recovered, rejoins the set, and its counters start
// a new baseline.
func TestHealthGPULostAndRecovered(t *testing.T) {
	lab, b, uuid := healthMachine(t, fastPoll)
	w := startWatch(t, b)
	lab.settle()

	lab.set(1, func(g *labGPU) { g.lost = true })
	got := w.expect(backend.HealthEvent{UUID: uuid[1], Kind: backend.HealthLost})
	// The probe, or a counter read if the loss fell between the two.
	if !strings.Contains(got[0].Message, "nvmlDevice") || !strings.Contains(got[0].Message, "ERROR_GPU_IS_LOST") {
		t.Errorf("message %q does not name the call and the error", got[0].Message)
	}
	lab.settle()
	eccReads := lab.calls(1, "ecc")
	lab.settle()
	lab.settle()
	w.none()
	if n := lab.calls(1, "ecc"); n != eccReads {
		t.Errorf("lost GPU's ECC counters read %d more times", n-eccReads)
	}
	if lab.registered(lab.lastSet(), 1) {
		t.Error("lost GPU still in the event set")
	}

	lab.set(1, func(g *labGPU) { g.lost, g.sbe = false, 5 })
	w.expect(
		backend.HealthEvent{UUID: uuid[1], Kind: backend.HealthRecovered},
		backend.HealthEvent{UUID: uuid[1], Kind: backend.HealthECCSingleBit, Count: 5},
	)
	lab.settle()
	w.none()
	if !lab.registered(lab.lastSet(), 1) {
		t.Error("recovered GPU not back in the event set")
	}
}

// Only ERROR_GPU_IS_LOST makes a GPU lost: a probe the driver refuses
// (NO_PERMISSION, as for an unprivileged caller on a MIG-enabled GPU) is
// an answer, both for a GPU in service and for a lost one coming back.
func TestHealthProbeRefusedIsAnAnswer(t *testing.T) {
	lab, b, uuid := healthMachine(t, fastPoll)
	lab.set(0, func(g *labGPU) { g.probeRet = nvml.ERROR_NO_PERMISSION })
	w := startWatch(t, b)
	lab.set(0, func(g *labGPU) { g.sbe = 1 })
	w.expect(backend.HealthEvent{UUID: uuid[0], Kind: backend.HealthECCSingleBit, Count: 1})

	lab.set(0, func(g *labGPU) { g.lost = true })
	w.expect(backend.HealthEvent{UUID: uuid[0], Kind: backend.HealthLost})
	lab.set(0, func(g *labGPU) { g.lost = false })
	w.expect(
		backend.HealthEvent{UUID: uuid[0], Kind: backend.HealthRecovered},
		backend.HealthEvent{UUID: uuid[0], Kind: backend.HealthECCSingleBit, Count: 1},
	)
	lab.settle()
	w.none()
}

// ERROR_GPU_IS_LOST from the event wait: the GPU the data names, or the
// one a probe finds lost when it names none, is reported once.
func TestHealthLostFromEventWait(t *testing.T) {
	lab, b, uuid := healthMachine(t, eventsOnly)
	w := startWatch(t, b)

	lab.queue <- waitResult{data: nvml.EventData{Device: lab.gpus[1].d}, ret: nvml.ERROR_GPU_IS_LOST}
	got := w.expect(backend.HealthEvent{UUID: uuid[1], Kind: backend.HealthLost})
	if !strings.Contains(got[0].Message, "nvmlEventSetWait") {
		t.Errorf("message %q does not name nvmlEventSetWait", got[0].Message)
	}

	// The set is rebuilt without GPU 1 after the loss; GPU 0 is lost after
	// that, so only the probe can find it.
	waitFor(t, "the event set rebuilt without GPU 1", func() bool {
		lab.mu.Lock()
		n := len(lab.sets)
		lab.mu.Unlock()
		return n >= 2 && lab.registered(lab.lastSet(), 0) && !lab.registered(lab.lastSet(), 1)
	})
	lab.set(0, func(g *labGPU) { g.lost = true })
	lab.queue <- waitResult{ret: nvml.ERROR_GPU_IS_LOST}
	got = w.expect(backend.HealthEvent{UUID: uuid[0], Kind: backend.HealthLost})
	if !strings.Contains(got[0].Message, probeCall) {
		t.Errorf("message %q does not name the probe", got[0].Message)
	}
	// Both lost: the watch waits on a timer now, not on a set of lost GPUs.
	if err := w.stop(); err != nil {
		t.Errorf("WatchHealth: %v", err)
	}
	w.none()
}

// A set whose every wait fails at once is not waited on again before the
// next poll: the loop does not spin (at most one wait per poll).
func TestHealthFailingWaitDoesNotSpin(t *testing.T) {
	lab, b, _ := healthMachine(t, 20*time.Millisecond)
	lab.mu.Lock()
	lab.waitHook = func() waitResult { return waitResult{ret: nvml.ERROR_UNKNOWN} }
	lab.mu.Unlock()
	w := startWatch(t, b)
	for range 5 {
		lab.settle()
	}
	if err := w.stop(); err != nil {
		t.Errorf("WatchHealth: %v", err)
	}
	polls := lab.probes()
	waits := 0
	lab.mu.Lock()
	sets := append([]*labSet(nil), lab.sets...)
	lab.mu.Unlock()
	for _, s := range sets {
		s.mu.Lock()
		waits += s.waits
		s.mu.Unlock()
	}
	if waits > polls {
		t.Errorf("%d waits in %d polls: the loop spins on a failing set", waits, polls)
	}
	w.none()
}

// Cancelling ctx ends WatchHealth with nil and frees every event set it
// created; a closed backend cannot be watched.
func TestHealthCancelFreesSet(t *testing.T) {
	lab, b, uuid := healthMachine(t, eventsOnly)
	w := startWatch(t, b)
	lab.event(0, nvml.EventTypeXidCriticalError, 13, noInstance, noInstance)
	w.expect(backend.HealthEvent{UUID: uuid[0], Kind: backend.HealthXID, Code: 13})
	if err := w.stop(); err != nil {
		t.Errorf("WatchHealth returned %v, want nil", err)
	}
	lab.mu.Lock()
	defer lab.mu.Unlock()
	if len(lab.sets) == 0 {
		t.Fatal("no event set created")
	}
	for i, s := range lab.sets {
		s.mu.Lock()
		if !s.freed {
			t.Errorf("event set %d not freed", i)
		}
		s.mu.Unlock()
	}
}

func TestHealthClosedBackend(t *testing.T) {
	_, b, _ := healthMachine(t, fastPoll)
	_ = b.Close()
	_, ctx := ktesting.NewTestContext(t)
	err := b.WatchHealth(ctx, make(chan backend.HealthEvent, 1))
	if err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("WatchHealth on a closed backend: %v", err)
	}
}

// A GPU that no longer answers its UUID (ERROR_GPU_IS_LOST) is watched
// under the UUID an earlier discovery published it with, so its loss
// reaches its device's taints instead of going unreported.
func TestHealthLostGPUWithoutUUID(t *testing.T) {
	lab, b, uuid := healthMachine(t, fastPoll)
	lab.gpus[1].d.GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_GPU_IS_LOST }
	lab.set(1, func(g *labGPU) { g.lost = true })
	w := startWatch(t, b)
	w.expect(backend.HealthEvent{UUID: uuid[1], Kind: backend.HealthLost})
}
