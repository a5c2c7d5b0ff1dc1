package driver

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/health"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
)

// counting counts the simulator's discoveries; with gate set, each one
// reports itself on gate.entered and waits for gate.release.
type counting struct {
	backend.Backend
	discovers atomic.Int32
	gate      *gate
}

type gate struct {
	entered chan struct{}
	release chan struct{}
}

func (c *counting) Discover(ctx context.Context) (*inventory.Node, error) {
	c.discovers.Add(1)
	if c.gate != nil {
		c.gate.entered <- struct{}{}
		<-c.gate.release
	}
	return c.Backend.Discover(ctx)
}

// newSim is a simulated catalogue machine in a directory of the test's.
func newSim(t *testing.T, profile string) *sim.Backend {
	t.Helper()
	m, err := sim.Profile(profile, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := sim.New(m, filepath.Join(t.TempDir(), "sim"), sim.WithBootID("boot"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sender records what a publisher hands the API server.
type sender struct {
	mu   sync.Mutex
	sent []resourceslice.DriverResources
}

func (s *sender) send(_ context.Context, r resourceslice.DriverResources) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, r)
	return nil
}

func (s *sender) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sent)
}

// TestTaintChangeDoesNotDiscover: a health change rebuilds the slices from
// the inventory discovered last, and sends them with the taint; only a
// changed inventory asks the backend again.
func TestTaintChangeDoesNotDiscover(t *testing.T) {
	ctx := testContext(t)
	b := &counting{Backend: newSim(t, "dgx-h100")}
	o := Options{NodeName: "node-1", Backend: b}
	tr := health.NewTracker(health.DefaultPolicy())
	p := newPublisher(&o, tr)
	var s sender
	p.start(s.send)
	if err := p.publish(ctx, inventoryChanged); err != nil {
		t.Fatal(err)
	}
	if got := b.discovers.Load(); got != 1 {
		t.Fatalf("%d discoveries for the first publish, want 1", got)
	}
	gpu := p.Published().Devices["gpu-3"].GPU.UUID
	if !tr.Observe(gpu, healthEvent(gpu)) {
		t.Fatal("XID 79 changed nothing")
	}
	if err := p.publish(ctx, taintsChanged); err != nil {
		t.Fatal(err)
	}
	if got := b.discovers.Load(); got != 1 {
		t.Errorf("%d discoveries after a taint change, want still 1", got)
	}
	if s.count() != 2 {
		t.Fatalf("%d sends, want 2 (the first, the taint)", s.count())
	}
	if tainted(s.sent[0], "gpu-3") || !tainted(s.sent[1], "gpu-3") {
		t.Errorf("gpu-3 tainted in the first send %v, the second %v; want only the second", tainted(s.sent[0], "gpu-3"), tainted(s.sent[1], "gpu-3"))
	}
	if err := p.publish(ctx, inventoryChanged); err != nil {
		t.Fatal(err)
	}
	if got := b.discovers.Load(); got != 2 {
		t.Errorf("%d discoveries after an inventory change, want 2", got)
	}
	if s.count() != 2 {
		t.Errorf("%d sends, want still 2: nothing changed", s.count())
	}
}

// tainted reports whether device name has a taint in r.
func tainted(r resourceslice.DriverResources, name string) bool {
	for _, pool := range r.Pools {
		for _, sl := range pool.Slices {
			for _, d := range sl.Devices {
				if d.Name == name && len(d.Taints) > 0 {
					return true
				}
			}
		}
	}
	return false
}

// TestHealthChangeDoesNotDiscover: on a running agent, a health signal
// reaches the API server as a taint without the backend being asked for
// its inventory again.
func TestHealthChangeDoesNotDiscover(t *testing.T) {
	c := &counting{}
	// The wrapper hides the simulator's generation, so no poll discovers;
	// a static node retries no orphans.
	n := launch(t, &node{profile: "dgx-h100", wrap: func(b backend.Backend) backend.Backend {
		c.Backend = b
		return c
	}})
	waitPublished(t, n)
	before := c.discovers.Load()
	uuid := n.driver.Published().Devices["gpu-2"].GPU.UUID
	waitFor(t, func() bool { return n.backend.HealthWatchers() > 0 })
	n.backend.InjectHealth(healthEvent(uuid))
	waitFor(t, func() bool { return n.publishedTaints("gpu-2") != "" })
	if got := c.discovers.Load(); got != before {
		t.Errorf("%d discoveries for a health change, want none", got-before)
	}
}

// TestPublishesCoalesce: the reasons that arrive while a publish runs are
// served by one more publish, however many callers sent them.
func TestPublishesCoalesce(t *testing.T) {
	ctx := testContext(t)
	g := &gate{entered: make(chan struct{}, 16), release: make(chan struct{})}
	b := &counting{Backend: newSim(t, "dgx-h100"), gate: g}
	o := Options{NodeName: "node-1", Backend: b}
	p := newPublisher(&o, health.NewTracker(health.DefaultPolicy()))
	var builds atomic.Int32
	p.built = func(context.Context, *publish.Result) { builds.Add(1) }
	var s sender
	p.start(s.send)

	first := make(chan error, 1)
	go func() { first <- p.publish(ctx, inventoryChanged) }()
	<-g.entered // the first publish is discovering
	const callers = 8
	errs := make(chan error, callers)
	for i := range callers {
		r := inventoryChanged
		if i%2 == 1 {
			r = taintsChanged
		}
		go func() { errs <- p.publish(ctx, r) }()
	}
	// Every caller waits on the publish after the running one.
	waitFor(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.next != nil && p.next.waiters == callers
	})
	close(g.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for range callers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := b.discovers.Load(); got != 2 {
		t.Errorf("%d discoveries, want 2: the first publish and one for all %d callers", got, callers)
	}
	if got := builds.Load(); got != 2 {
		t.Errorf("%d builds, want 2", got)
	}
	if got := s.count(); got != 1 {
		t.Errorf("%d sends, want 1: the second publish built the same slices", got)
	}
}

// TestCorruptCheckpointRecoversCarves: an agent that finds its checkpoint
// corrupt rebuilds it from the claims' CDI specs, before its first build,
// against the devices of the inventory it discovered: a partition it had
// carved for a claim is still its own to destroy at unprepare.
func TestCorruptCheckpointRecoversCarves(t *testing.T) {
	n := launch(t, &node{profile: "dgx-h100", partitioning: publish.Dynamic})
	claim := n.addClaim("slice", "gpu-7-mig-1g-10gb-5")
	if e := n.prepare(claim).Claims[claim.Uid].GetError(); e != "" {
		t.Fatal(e)
	}
	n.stop()
	path := filepath.Join(n.dir, "plugin", "checkpoint.json")
	for _, p := range []string{path, path + ".1"} {
		if err := os.WriteFile(p, []byte("{not json"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	n.start()
	c, ok := n.checkpointClaims()[claim.Uid]
	if !ok || len(c.Devices) != 1 || !c.Devices[0].CreatedPartition {
		t.Fatalf("rebuilt claim %+v, want its one device's partition created by the agent", c)
	}
	if e := n.unprepare(claim).Claims[claim.Uid].GetError(); e != "" {
		t.Fatal(e)
	}
	if inv, _ := n.backend.Discover(n.ctx); countPartitions(inv.GPUs) != 0 {
		t.Errorf("%d partitions after unprepare, want none", countPartitions(inv.GPUs))
	}
}
