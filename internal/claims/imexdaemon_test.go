package claims

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeDaemon is a node's IMEX daemon as the agent runs it: Ensure starts
// it (or fails with err), Stop stops it, and it answers READY once it has
// run for `after` status queries.
type fakeDaemon struct {
	mu             sync.Mutex
	err            error
	after          int
	running        bool
	asked          int
	domains        []string
	ensures, stops int
	neverReady     bool
}

func (d *fakeDaemon) Ensure(_ context.Context, domain string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ensures++
	d.domains = append(d.domains, domain)
	if d.err != nil {
		return d.err
	}
	if !d.running {
		d.running, d.asked = true, 0
	}
	return nil
}

func (d *fakeDaemon) Stop(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stops++
	d.running = false
	return nil
}

func (d *fakeDaemon) status(context.Context) (bool, string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.running {
		return false, "", errors.New("no IMEX daemon answers on /run/imex.sock")
	}
	d.asked++
	if d.neverReady || d.asked <= d.after {
		return false, "NOT_READY: starting", nil
	}
	return true, "READY", nil
}

func (d *fakeDaemon) counts() (ensures, stops int, running bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ensures, d.stops, d.running
}

// TestChannelClaimsRunTheDaemon: where the agent runs the node's IMEX
// daemon, the first channel's prepare starts it and waits until it is
// ready (without a kubelet retry), a second claim finds it running, the
// unprepare of the first leaves it to the second, and the last one's
// unprepare stops it. A daemon that cannot be started or never gets
// ready fails the prepare as not ready, leaving no entry; an agent that
// starts with no channel claimed stops a daemon left running.
func TestChannelClaimsRunTheDaemon(t *testing.T) {
	ctx := ctxFor(t)
	d := &fakeDaemon{after: 2}
	e := newEnv(t, "gb200-nvl72-tray")
	e.imex = (&imexNode{}).config()
	e.imex.Status, e.imex.Daemon = d.status, d
	m, _ := e.start(nil)

	if _, err := m.Prepare(ctx, channelClaim("a", trayDomain, 3)); err != nil {
		t.Fatalf("the first channel's prepare: %v", err)
	}
	if ensures, stops, running := d.counts(); ensures != 1 || stops != 0 || !running || d.domains[0] != trayDomain {
		t.Fatalf("after the first prepare: %d ensures (domains %v), %d stops, running %v; want the daemon of %s started once", ensures, d.domains, stops, running, trayDomain)
	}
	if _, err := m.Prepare(ctx, channelClaim("b", trayDomain, 4)); err != nil {
		t.Fatal(err)
	}
	if err := m.Unprepare(ctx, "uid-a", "default", "a"); err != nil {
		t.Fatal(err)
	}
	if _, stops, running := d.counts(); stops != 0 || !running {
		t.Fatalf("the daemon stopped while claim b holds channel 4 (%d stops)", stops)
	}
	if err := m.Unprepare(ctx, "uid-b", "default", "b"); err != nil {
		t.Fatal(err)
	}
	if _, stops, running := d.counts(); stops != 1 || running {
		t.Fatalf("after the last channel's unprepare: %d stops, running %v; want it stopped", stops, running)
	}

	// Starting fails: not ready, nothing recorded.
	d.err = errors.New(`pods "tessera-imex-1" is forbidden`)
	if _, err := m.Prepare(ctx, channelClaim("c", trayDomain, 5)); !errors.Is(err, ErrIMEXNotReady) || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("a daemon that cannot start: %v, want ErrIMEXNotReady naming why", err)
	}
	if len(m.Prepared()) != 0 || e.hasSpec("uid-c") {
		t.Fatal("a claim whose daemon could not start left an entry or a spec")
	}
	// Never ready: the prepare gives up after ReadyWait.
	d.err, d.neverReady = nil, true
	e.imex.ReadyWait = 600 * time.Millisecond
	if _, err := m.Prepare(ctx, channelClaim("c", trayDomain, 5)); !errors.Is(err, ErrIMEXNotReady) || !strings.Contains(err.Error(), "not ready after 600ms (NOT_READY: starting)") {
		t.Fatalf("a daemon never ready: %v", err)
	}

	// A new agent finds no channel claimed: the daemon left running goes.
	m2, _ := e.start(nil)
	if err := m2.StopIdleIMEX(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, running := d.counts(); running {
		t.Fatal("an idle node's daemon left running at start-up")
	}
}
