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
// included, so deleted slices turn the agent unready a TTL later; a check
// its caller gave up on is not kept.
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

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	now = now.Add(10 * time.Second)
	result = nil
	c.check = func(ctx context.Context) error { calls++; return ctx.Err() }
	_ = c.get(cancelled)
	c.check = func(context.Context) error { calls++; return nil }
	if err := c.get(ctx); err != nil || calls != 4 {
		t.Fatalf("after a cancelled check: %v, %d calls; want a fresh check", err, calls)
	}
}
