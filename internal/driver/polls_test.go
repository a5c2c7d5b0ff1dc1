package driver

import (
	"sync"
	"testing"

	"github.com/tessera-gpu/tessera/internal/sim"
)

// pollCounter is the simulator as the agent sees it, counting the agent's
// inventory polls (each a Generation call of its watchInventory loop), so
// that a test can wait for the agent to have looked again instead of
// sleeping. It embeds the simulator itself, so the agent finds every
// optional interface the simulator offers.
type pollCounter struct {
	*simulator
	mu    sync.Mutex
	polls int
}

// simulator keeps sim.Backend's name out of pollCounter's embedded field.
type simulator = sim.Backend

func (p *pollCounter) Generation() (string, error) {
	p.mu.Lock()
	p.polls++
	p.mu.Unlock()
	return p.simulator.Generation()
}

func (p *pollCounter) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.polls
}

// afterPolls waits until the agent has polled its backend k more times:
// it has looked at the inventory k times since the call, and published
// within each poll that saw a change.
func (n *node) afterPolls(t *testing.T, k int) {
	t.Helper()
	if n.polls == nil {
		t.Fatal("afterPolls on a node whose backend is wrapped: the agent does not poll it")
	}
	target := n.polls.count() + k
	waitFor(t, func() bool { return n.polls.count() >= target })
}
