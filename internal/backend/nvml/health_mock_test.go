//go:build cgo && linux

package nvml

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/backend"
)

// go-nvml's mock server has no event sets and no health counters. The
// health lab adds both to a mock machine: per GPU, ECC totals, row-remap
// and retired-page flags, supported event types and a "lost" switch that
// makes every call of the GPU answer ERROR_GPU_IS_LOST; and event sets
// whose Wait hands out what the test queues, honouring the timeout.

// bound is how long a test waits for something that must happen. Nothing
// is asserted on timing: it only keeps a broken build from hanging.
const bound = 20 * time.Second

type healthLab struct {
	t    *testing.T
	s    *server.Server
	gpus []*labGPU

	// queue feeds every event set's Wait: one result per call.
	queue chan waitResult

	mu        sync.Mutex
	createRet nvml.Return       // EventSetCreate's answer (SUCCESS by default)
	sets      []*labSet         // every set created, in order
	waitHook  func() waitResult // when set, Wait answers this at once
}

type waitResult struct {
	data nvml.EventData
	ret  nvml.Return
}

// labSet is one event set: whether it was freed, and what was registered.
type labSet struct {
	mock.EventSet
	mu         sync.Mutex
	freed      bool
	registered map[*server.Device]uint64
	waits      int
}

// labGPU is one GPU's health state, guarded by mu.
type labGPU struct {
	d *server.Device

	mu                        sync.Mutex
	sbe, dbe                  uint64
	remapPending, remapFailed bool
	pagesPending              bool
	lost                      bool
	supported                 uint64 // GetSupportedEventTypes
	supportedRet              nvml.Return
	registerRet               nvml.Return
	eccRet, remapRet, pageRet nvml.Return // NOT_SUPPORTED etc.
	probeRet                  nvml.Return // GetMemoryInfo's answer when not lost
	probes                    int         // GetMemoryInfo calls
	calls                     map[string]int
}

func newHealthLab(t *testing.T, s *server.Server) *healthLab {
	t.Helper()
	lab := &healthLab{t: t, s: s, queue: make(chan waitResult, 64), createRet: nvml.SUCCESS}
	for _, dev := range s.Devices {
		g := &labGPU{
			d:            dev.(*server.Device),
			supported:    nvml.EventTypeAll,
			supportedRet: nvml.SUCCESS,
			registerRet:  nvml.SUCCESS,
			probeRet:     nvml.SUCCESS,
			eccRet:       nvml.SUCCESS,
			remapRet:     nvml.SUCCESS,
			pageRet:      nvml.ERROR_NOT_SUPPORTED, // Ampere and later: row remapping instead
			calls:        map[string]int{},
		}
		g.install(lab)
		lab.gpus = append(lab.gpus, g)
	}
	s.EventSetCreateFunc = lab.createSet
	return lab
}

// answer counts a call and returns ERROR_GPU_IS_LOST while the GPU is
// lost, else ret. The caller holds g.mu.
func (g *labGPU) answer(call string, ret nvml.Return) nvml.Return {
	g.calls[call]++
	if g.lost {
		return nvml.ERROR_GPU_IS_LOST
	}
	return ret
}

func (g *labGPU) install(lab *healthLab) {
	d := g.d
	memInfo := d.GetMemoryInfoFunc
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		g.mu.Lock()
		g.probes++
		lost, ret := g.lost, g.probeRet
		g.mu.Unlock()
		if lost {
			return nvml.Memory{}, nvml.ERROR_GPU_IS_LOST
		}
		if ret != nvml.SUCCESS {
			return nvml.Memory{}, ret
		}
		return memInfo()
	}
	d.GetTotalEccErrorsFunc = func(t nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if c != nvml.VOLATILE_ECC {
			lab.t.Errorf("ECC counter type %d read; want volatile", c)
		}
		if ret := g.answer("ecc", g.eccRet); ret != nvml.SUCCESS {
			return 0, ret
		}
		if t == nvml.MEMORY_ERROR_TYPE_CORRECTED {
			return g.sbe, nvml.SUCCESS
		}
		return g.dbe, nvml.SUCCESS
	}
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if ret := g.answer("remap", g.remapRet); ret != nvml.SUCCESS {
			return 0, 0, false, false, ret
		}
		return 0, 0, g.remapPending, g.remapFailed, nvml.SUCCESS
	}
	d.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if ret := g.answer("pages", g.pageRet); ret != nvml.SUCCESS {
			return 0, ret
		}
		if g.pagesPending {
			return nvml.FEATURE_ENABLED, nvml.SUCCESS
		}
		return nvml.FEATURE_DISABLED, nvml.SUCCESS
	}
	d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
		g.mu.Lock()
		defer g.mu.Unlock()
		if ret := g.answer("supported", g.supportedRet); ret != nvml.SUCCESS {
			return 0, ret
		}
		return g.supported, nvml.SUCCESS
	}
	d.RegisterEventsFunc = func(types uint64, set nvml.EventSet) nvml.Return {
		g.mu.Lock()
		ret := g.answer("register", g.registerRet)
		g.mu.Unlock()
		if ret != nvml.SUCCESS {
			return ret
		}
		ls := set.(*labSet)
		ls.mu.Lock()
		defer ls.mu.Unlock()
		ls.registered[d] |= types
		return nvml.SUCCESS
	}
}

func (lab *healthLab) createSet() (nvml.EventSet, nvml.Return) {
	lab.mu.Lock()
	defer lab.mu.Unlock()
	if lab.createRet != nvml.SUCCESS {
		return nil, lab.createRet
	}
	ls := &labSet{registered: map[*server.Device]uint64{}}
	ls.FreeFunc = func() nvml.Return {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		if ls.freed {
			lab.t.Error("event set freed twice")
		}
		ls.freed = true
		return nvml.SUCCESS
	}
	ls.WaitFunc = func(ms uint32) (nvml.EventData, nvml.Return) {
		ls.mu.Lock()
		ls.waits++
		freed := ls.freed
		ls.mu.Unlock()
		if freed {
			lab.t.Error("wait on a freed event set")
			return nvml.EventData{}, nvml.ERROR_UNINITIALIZED
		}
		lab.mu.Lock()
		hook := lab.waitHook
		lab.mu.Unlock()
		if hook != nil {
			r := hook()
			return r.data, r.ret
		}
		t := time.NewTimer(time.Duration(ms) * time.Millisecond)
		defer t.Stop()
		select {
		case r := <-lab.queue:
			return r.data, r.ret
		case <-t.C:
			return nvml.EventData{}, nvml.ERROR_TIMEOUT
		}
	}
	lab.sets = append(lab.sets, ls)
	return ls, nvml.SUCCESS
}

// set changes one GPU's state under its lock.
func (lab *healthLab) set(i int, fn func(g *labGPU)) {
	g := lab.gpus[i]
	g.mu.Lock()
	defer g.mu.Unlock()
	fn(g)
}

// calls reads one GPU's count of a call.
func (lab *healthLab) calls(i int, call string) int {
	g := lab.gpus[i]
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls[call]
}

// event queues one event of GPU i for the next Wait.
func (lab *healthLab) event(i int, typ, data uint64, gi, ci uint32) {
	lab.queue <- waitResult{data: nvml.EventData{Device: lab.gpus[i].d, EventType: typ, EventData: data, GpuInstanceId: gi, ComputeInstanceId: ci}, ret: nvml.SUCCESS}
}

// lastSet is the event set created last, and whether it is still live.
func (lab *healthLab) lastSet() *labSet {
	lab.mu.Lock()
	defer lab.mu.Unlock()
	if len(lab.sets) == 0 {
		return nil
	}
	return lab.sets[len(lab.sets)-1]
}

// registered reports whether GPU i is registered in set.
func (lab *healthLab) registered(set *labSet, i int) bool {
	if set == nil {
		return false
	}
	set.mu.Lock()
	defer set.mu.Unlock()
	_, ok := set.registered[lab.gpus[i].d]
	return ok
}

// probes is how many polls have probed GPU 0.
func (lab *healthLab) probes() int {
	g := lab.gpus[0]
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.probes
}

// settle returns once every poll that had started when it was called,
// and one poll after those, has finished: the watch probes GPU 0 first in
// every poll and sends each event before going on, so two more probes of
// GPU 0 mean the events of everything the test changed before are in the
// channel.
func (lab *healthLab) settle() {
	lab.t.Helper()
	start := lab.probes()
	waitFor(lab.t, "two more polls", func() bool { return lab.probes() >= start+2 })
}

// waitFor polls cond until it holds, failing the test after bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// watch runs WatchHealth until the test ends (or stop is called) and
// collects its events.
type watch struct {
	t      *testing.T
	events chan backend.HealthEvent
	cancel context.CancelFunc
	done   chan error
}

func startWatch(t *testing.T, b *Backend) *watch {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	w := &watch{t: t, events: make(chan backend.HealthEvent, 256), cancel: cancel, done: make(chan error, 1)}
	go func() { w.done <- b.WatchHealth(ctx, w.events) }()
	t.Cleanup(func() { w.stop() })
	return w
}

// stop cancels the watch and returns what WatchHealth returned.
func (w *watch) stop() error {
	w.t.Helper()
	w.cancel()
	select {
	case err := <-w.done:
		w.done <- err // later calls see it too
		return err
	case <-time.After(bound):
		w.t.Fatal("WatchHealth did not return after ctx was cancelled")
		return nil
	}
}

// next is the next event, failing after bound.
func (w *watch) next() backend.HealthEvent {
	w.t.Helper()
	select {
	case ev := <-w.events:
		return ev
	case <-time.After(bound):
		w.t.Fatal("no health event")
		return backend.HealthEvent{}
	}
}

// none fails if an event is waiting. Call it after lab.settle.
func (w *watch) none() {
	w.t.Helper()
	select {
	case ev := <-w.events:
		w.t.Errorf("unexpected event %+v", ev)
	default:
	}
}

// expect takes len(want) events and compares UUID, Kind, Code and Count
// (order within the batch ignored: GPUs are polled in index order, but an
// event-set event may arrive between two polls).
func (w *watch) expect(want ...backend.HealthEvent) []backend.HealthEvent {
	w.t.Helper()
	var got []backend.HealthEvent
	for range want {
		got = append(got, w.next())
	}
	left := append([]backend.HealthEvent(nil), got...)
	for _, wv := range want {
		found := false
		for i, g := range left {
			if g.UUID == wv.UUID && g.Kind == wv.Kind && g.Code == wv.Code && g.Count == wv.Count {
				left = append(left[:i], left[i+1:]...)
				found = true
				break
			}
		}
		if !found {
			w.t.Errorf("missing event %s %s code %d count %d; got %+v", wv.UUID, wv.Kind, wv.Code, wv.Count, got)
		}
	}
	for _, g := range got {
		if g.Time.IsZero() || g.Message == "" {
			w.t.Errorf("event without time or message: %+v", g)
		}
	}
	return got
}
