package driver

import (
	"context"
	"sync"
	"time"
)

// readyTTL is how long a confirmation that the node's pool is published
// (or that it is not) answers readiness: /readyz is on an unauthenticated
// port, and a LIST per request would let anything that can reach it spend
// the agent's API budget that prepares need. The kubelet probes every 10 s,
// so a deleted slice still turns the agent unready within a probe or two.
const readyTTL = 5 * time.Second

// readyCheckTimeout bounds one check: it runs for no caller in particular,
// so no caller's deadline ends it.
const readyCheckTimeout = 10 * time.Second

// confirmation caches the result of an API check for a while, and lets
// every caller share the one check in flight. The check runs apart from
// its callers: one that hangs up does not cancel it, and its result is kept
// all the same. Were a cancelled check not kept, a client that opens and
// drops requests would keep one LIST running without end.
type confirmation struct {
	check   func(context.Context) error
	ttl     time.Duration
	timeout time.Duration
	now     func() time.Time

	mu sync.Mutex
	// at is when err was found; zero until a check completes.
	at       time.Time
	err      error
	inflight chan struct{}
}

func newConfirmation(check func(context.Context) error, ttl time.Duration) *confirmation {
	return &confirmation{check: check, ttl: ttl, timeout: readyCheckTimeout, now: time.Now}
}

// get returns the last result while it is younger than the TTL, else waits
// for the check in flight, starting one when none is, or for ctx.
func (c *confirmation) get(ctx context.Context) error {
	c.mu.Lock()
	if !c.at.IsZero() && c.now().Sub(c.at) < c.ttl {
		err := c.err
		c.mu.Unlock()
		return err
	}
	done := c.inflight
	if done == nil {
		done = make(chan struct{})
		c.inflight = done
		// Without the caller's cancellation, with its values (the logger).
		go c.run(context.WithoutCancel(ctx), done)
	}
	c.mu.Unlock()
	select {
	case <-done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run runs one check and keeps its result, whoever still waits for it.
func (c *confirmation) run(ctx context.Context, done chan struct{}) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	err := c.check(ctx)
	c.mu.Lock()
	c.at, c.err = c.now(), err
	c.inflight = nil
	c.mu.Unlock()
	close(done)
}
