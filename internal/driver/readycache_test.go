package driver

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConfirmationFlood: a flood of readiness requests costs one API check
// per TTL, however many arrive, and concurrent ones share the one in flight.
func TestConfirmationFlood(t *testing.T) {
	var calls atomic.Int32
	release := make(chan struct{})
	c := newConfirmation(func(context.Context) error {
		calls.Add(1)
		<-release
		return nil
	}, time.Minute)
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }

	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	for range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- c.get(context.Background())
		}()
	}
	// Let every caller arrive at the one check, then finish it.
	for calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("1000 concurrent requests made %d API checks, want 1", n)
	}
	for range 1000 {
		if err := c.get(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("1000 more requests within the TTL made %d API checks in all, want 1", n)
	}
}

// TestConfirmationExpires: a result answers for the TTL only, failures
// included, so deleted slices turn the agent unready a TTL later.
func TestConfirmationExpires(t *testing.T) {
	var calls int
	result := error(nil)
	c := newConfirmation(func(context.Context) error { calls++; return result }, 5*time.Second)
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	ctx := context.Background()

	if err := c.get(ctx); err != nil || calls != 1 {
		t.Fatalf("first: %v, %d calls", err, calls)
	}
	result = errors.New("ResourceSlices not published yet")
	now = now.Add(4 * time.Second)
	if err := c.get(ctx); err != nil || calls != 1 {
		t.Fatalf("within the TTL: %v, %d calls; want the cached ok", err, calls)
	}
	now = now.Add(2 * time.Second)
	if err := c.get(ctx); err == nil || calls != 2 {
		t.Fatalf("after the TTL: %v, %d calls; want a new check that fails", err, calls)
	}
	now = now.Add(time.Second)
	if err := c.get(ctx); err == nil || calls != 2 {
		t.Fatalf("a failure is cached too: %v, %d calls", err, calls)
	}

}

// TestConfirmationCallersHangUp: requests whose callers hang up share the
// one check all the same; it runs to its end with a context none of them
// cancels, and its result answers the next requests for the TTL. A client
// that opens and drops requests costs one check per TTL, as any other.
func TestConfirmationCallersHangUp(t *testing.T) {
	var calls atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	c := newConfirmation(func(ctx context.Context) error {
		if calls.Add(1) == 1 {
			close(started)
		}
		<-release
		return ctx.Err() // nil unless a caller's cancel reached the check
	}, 5*time.Second)
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }

	for i := range 100 {
		ctx, cancel := context.WithCancel(context.Background())
		if i%2 == 0 {
			cancel() // hung up before asking
		} else {
			go func() { <-started; cancel() }() // hangs up while the check runs
		}
		if err := c.get(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("request %d: %v, want its own cancellation", i, err)
		}
		cancel()
	}
	close(release)
	// Waits for the check in flight, which every caller above left.
	if err := c.get(context.Background()); err != nil {
		t.Fatalf("the check the callers left: %v, want it run to its end uncancelled", err)
	}
	for range 100 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = c.get(ctx)
		if err := c.get(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("300 requests within one TTL, 150 of them hung up, made %d checks; want 1", n)
	}
	now = now.Add(6 * time.Second)
	if err := c.get(context.Background()); err != nil || calls.Load() != 2 {
		t.Fatalf("after the TTL: %v, %d checks; want a second", err, calls.Load())
	}
}
