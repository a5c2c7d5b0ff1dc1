package sim

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/internal/backend"
)

func TestWatchHealthReturnsOnCancel(t *testing.T) {
	b, _ := newBackend(t, mustProfile(t, "t4-2"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.WatchHealth(ctx, make(chan backend.HealthEvent)) }()
	waitWatchers(t, b, 1)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("WatchHealth returned %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WatchHealth did not return after cancel")
	}
	waitWatchers(t, b, 0)
}

func TestInjectHealth(t *testing.T) {
	b, _ := newBackend(t, mustProfile(t, "t4-2"))
	// No watchers: injecting must not block.
	gpu := b.machine.Node.GPUs[1].UUID
	b.InjectHealth(backend.HealthEvent{UUID: gpu, Kind: backend.HealthXID, Code: 79})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	chans := []chan backend.HealthEvent{make(chan backend.HealthEvent, 16), make(chan backend.HealthEvent, 16)}
	var wg sync.WaitGroup
	for _, ch := range chans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = b.WatchHealth(ctx, ch)
		}()
	}
	waitWatchers(t, b, 2)
	ev := backend.HealthEvent{UUID: gpu, Kind: backend.HealthXID, Code: 79}
	b.InjectHealth(ev)
	for i, ch := range chans {
		got := next(t, ch, func(e backend.HealthEvent) bool { return e.Kind == backend.HealthXID })
		if got.UUID != gpu || got.Code != 79 || got.Time.IsZero() {
			t.Errorf("watcher %d got %+v", i, got)
		}
	}
	cancel()
	wg.Wait()
	// Watchers gone: still no blocking.
	b.InjectHealth(ev)
}

// A watch starts from zero counters and the recorded faults, and sees
// faults appended while it runs; counts are running totals since the last
// recovery.
func TestFaultLog(t *testing.T) {
	b, _ := newBackend(t, mustProfile(t, "mixed-inference"))
	a100, mi210 := b.machine.Node.GPUs[0].UUID, b.machine.Node.GPUs[4].UUID
	if _, err := AppendFault(b.stateDir, backend.HealthEvent{UUID: a100, Kind: backend.HealthECCSingleBit, Count: 5}); err != nil {
		t.Fatal(err)
	}
	snap, err := b.HealthSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	var zeros, sbe int
	for _, e := range snap {
		switch {
		case e.Time.Equal(baseline) && e.Count == 0:
			zeros++
			if e.UUID == mi210 && e.Kind != backend.HealthRASCorrectable && e.Kind != backend.HealthRASUncorrectable {
				t.Errorf("AMD GPU baseline of kind %s", e.Kind)
			}
		case e.Kind == backend.HealthECCSingleBit && e.Count == 5:
			sbe++
		}
	}
	if zeros != 10 || sbe != 1 {
		t.Fatalf("snapshot: %d zero baselines (want 10), %d recorded faults (want 1): %+v", zeros, sbe, snap)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := make(chan backend.HealthEvent, 64)
	go func() { _ = b.WatchHealth(ctx, ch) }()
	isSBE := func(e backend.HealthEvent) bool { return e.Kind == backend.HealthECCSingleBit && e.Count > 0 }
	if got := next(t, ch, isSBE); got.Count != 5 {
		t.Fatalf("replayed %+v", got)
	}
	for _, step := range []struct {
		ev   backend.HealthEvent
		want int64
	}{
		{backend.HealthEvent{UUID: a100, Kind: backend.HealthECCSingleBit, Count: 7}, 12},
		{backend.HealthEvent{UUID: a100, Kind: backend.HealthRecovered}, 0},
		{backend.HealthEvent{UUID: a100, Kind: backend.HealthECCSingleBit, Count: 3}, 3},
	} {
		rec, err := AppendFault(b.stateDir, step.ev)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Count != step.want {
			t.Errorf("recorded %s count %d, want %d", rec.Kind, rec.Count, step.want)
		}
		got := next(t, ch, func(e backend.HealthEvent) bool { return e.Kind == step.ev.Kind && e.Count == step.want })
		if got.UUID != a100 {
			t.Errorf("watched %+v", got)
		}
	}
}

// next returns the first event on ch that ok accepts.
func next(t *testing.T, ch <-chan backend.HealthEvent, ok func(backend.HealthEvent) bool) backend.HealthEvent {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case e := <-ch:
			if ok(e) {
				return e
			}
		case <-deadline:
			t.Fatal("no matching health event")
		}
	}
}

func waitWatchers(t *testing.T, b *Backend, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for b.watcherCount() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d watchers, want %d", b.watcherCount(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A restarted watch replays only what followed each GPU's last recovery:
// an XID 79 cleared by a reset must not come back, even for a moment.
func TestReplayStartsAfterRecovery(t *testing.T) {
	b, _ := newBackend(t, mustProfile(t, "t4-2"))
	g0, g1 := b.machine.Node.GPUs[0].UUID, b.machine.Node.GPUs[1].UUID
	for _, ev := range []backend.HealthEvent{
		{UUID: g0, Kind: backend.HealthXID, Code: 79},
		{UUID: g1, Kind: backend.HealthXID, Code: 94},
		{UUID: g0, Kind: backend.HealthRecovered},
		{UUID: g0, Kind: backend.HealthECCSingleBit, Count: 2},
	} {
		if _, err := AppendFault(b.stateDir, ev); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := b.HealthSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range snap {
		if !e.Time.Equal(baseline) {
			got = append(got, fmt.Sprintf("%s:%s:%d:%d", map[string]string{g0: "g0", g1: "g1"}[e.UUID], e.Kind, e.Code, e.Count))
		}
	}
	if want := "g1:xid:94:0,g0:ecc-sbe:0:2"; strings.Join(got, ",") != want {
		t.Errorf("replayed %v, want %s", got, want)
	}
}
