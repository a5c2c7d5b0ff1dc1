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

// confirmation caches the result of an API check for a while, and lets
// concurrent callers share the one check in flight.
type confirmation struct {
	check func(context.Context) error
	ttl   time.Duration
	now   func() time.Time

	mu sync.Mutex
	// at is when err was found; zero until a check completes.
	at       time.Time
	err      error
	inflight chan struct{}
}

func newConfirmation(check func(context.Context) error, ttl time.Duration) *confirmation {
	return &confirmation{check: check, ttl: ttl, now: time.Now}
}

// get returns the last result while it is younger than the TTL, else runs
// the check once for every caller waiting on it.
func (c *confirmation) get(ctx context.Context) error {
	c.mu.Lock()
	for {
		if !c.at.IsZero() && c.now().Sub(c.at) < c.ttl {
			err := c.err
			c.mu.Unlock()
			return err
		}
		if c.inflight == nil {
			break
		}
		wait := c.inflight
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
		c.mu.Lock()
	}
	done := make(chan struct{})
	c.inflight = done
	c.mu.Unlock()

	err := c.check(ctx)

	c.mu.Lock()
	// A check cut short by its caller's context says nothing of the pool.
	if ctx.Err() == nil {
		c.at, c.err = c.now(), err
	}
	c.inflight = nil
	c.mu.Unlock()
	close(done)
	return err
}
