package sim

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/pkg/backend"
	"github.com/tessera-gpu/tessera/pkg/inventory"
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
	b.InjectHealth(backend.HealthEvent{UUID: gpu, Health: inventory.Health{State: inventory.Unhealthy, Reason: "XID 79"}, Kind: "xid"})
	if h := discover(t, b).GPUs[1].Health; h.State != inventory.Unhealthy || h.Reason != "XID 79" {
		t.Errorf("health not recorded: %+v", h)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	chans := []chan backend.HealthEvent{make(chan backend.HealthEvent, 1), make(chan backend.HealthEvent, 1)}
	var wg sync.WaitGroup
	for _, ch := range chans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = b.WatchHealth(ctx, ch)
		}()
	}
	waitWatchers(t, b, 2)
	ev := backend.HealthEvent{UUID: gpu, Health: inventory.Health{State: inventory.Healthy, Reason: "recovered"}, Kind: "xid"}
	b.InjectHealth(ev)
	for i, ch := range chans {
		select {
		case got := <-ch:
			if got.UUID != gpu || got.Health != ev.Health || got.Kind != "xid" || got.Time.IsZero() {
				t.Errorf("watcher %d got %+v", i, got)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("watcher %d got nothing", i)
		}
	}
	if h := discover(t, b).GPUs[1].Health; h.State != inventory.Healthy {
		t.Errorf("health not updated: %+v", h)
	}
	cancel()
	wg.Wait()
	// Watchers gone: still no blocking.
	b.InjectHealth(ev)
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
