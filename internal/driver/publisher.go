package driver

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/channelpool"
	"github.com/tessera-gpu/tessera/internal/gpuvendor/vendors"
	"github.com/tessera-gpu/tessera/internal/health"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/isolation"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// reason says what changed since the last build, and so what a publish
// redoes. Reasons that arrive while a publish runs are merged into one.
type reason uint8

// unchanged asks for no rebuild: what was built last is sent if it was not
// yet (the first publish, at Start).
const unchanged reason = 0

const (
	// inventoryChanged: the hardware may have changed (a new backend
	// generation, an orphan sweep, claims recovery); discover it again.
	inventoryChanged reason = 1 << iota
	// taintsChanged: a GPU's health conditions changed; build again from
	// the inventory discovered last, which a taint does not change.
	taintsChanged
	// heldChanged: which partitions claims hold changed (the checkpoint
	// was read); build again.
	heldChanged
	// windowOpen: the placement window may open GPUs; a build for any other
	// reason only closes them, so that an opening is a slice update of its
	// own (window.go in internal/publish).
	windowOpen
)

// publisher owns what the node publishes: the inventory last discovered,
// the slices built from it with the GPUs' taints and the partitions claims
// hold, and what the API server was last handed. One publish runs at a
// time; the callers that arrive meanwhile share the one that follows.
type publisher struct {
	opts *Options
	// tracker holds the GPUs' health conditions: discovery's verdicts go
	// in (discover), taints come out.
	tracker *health.Tracker
	taints  func(gpu string) []resourceapi.DeviceTaint
	// built is told of every build (the agent's log and metrics).
	built func(ctx context.Context, res *publish.Result)

	mu sync.Mutex
	// next is the publish that takes the reasons pending; nil when none
	// are. busy is set while a caller runs publishes.
	next    *round
	pending reason
	busy    bool
	// send hands slices to the API server; nil until Start, when builds
	// are kept and nothing is sent.
	send func(context.Context, resourceslice.DriverResources) error
	// held is what claims hold; nil before the checkpoint is read.
	// heldWhole says which GPUs a claim holds whole (the window closes
	// them); nil: none.
	held      func(string, *inventory.Partition) bool
	heldWhole func(gpu string) bool
	// passed are the GPUs claims pass through (passthrough.go); nil:
	// none.
	passed func() []publish.PassedGPU

	// labeler keeps the node's fabric domain label (nodelabel.go); nil
	// without an API client (the dry run).
	labeler *nodeLabeler
	// channels publishes the IMEX channels of the node's domain while
	// the agent holds its lease; nil where the agent offers none.
	channels *channelpool.Publisher
	// domain is the multi-node NVLink domain of the inventory published
	// last ("" for none), for claims of IMEX channels.
	domain atomic.Value

	// Written only by the caller that runs publishes (busy), one at a time,
	// and earlyErr by New.
	inv      *inventory.Node
	sent     *resourceslice.DriverResources
	earlyErr error
	// open names the dynamic GPUs whose placements the last build
	// published (what the window keeps open); nil until known, when every
	// GPU counts as open (window.go in internal/publish).
	open map[string]bool
	// seen is every GPU discovered, by bus ID, as last discovered; groups
	// the IOMMU group of each that can be passed through, and
	// passableSaid what was last logged of those that cannot
	// (passthrough.go).
	seen         map[string]inventory.GPU
	groups       map[string]int
	passableSaid string

	resMu     sync.RWMutex
	published *publish.Result
}

// round is one publish and what it returned, for every caller it serves.
type round struct {
	done chan struct{}
	err  error
	// waiters counts the callers sharing it (tests).
	waiters int
}

// newPublisher is the publisher of o's node, its taints those tr reports.
func newPublisher(o *Options, tr *health.Tracker) *publisher {
	p := &publisher{opts: o, tracker: tr, taints: tr.Taints}
	if o.KubeClient != nil {
		p.labeler = &nodeLabeler{client: o.KubeClient, node: o.NodeName, imexAddress: o.IMEXAddress}
	}
	if o.KubeClient != nil && o.IMEXChannels > 0 {
		var err error
		p.channels, err = channelpool.NewPublisher(channelpool.Config{Client: o.KubeClient, Namespace: o.IMEXNamespace, Node: o.NodeName, Channels: o.IMEXChannels})
		if err != nil {
			p.earlyErr = err
		}
	}
	return p
}

// publishOptions is the one place the agent's options and the node's state
// (its GPUs' taints, the partitions claims hold) become publish.Options: the
// running agent and the dry run build through it. held is nil before the
// checkpoint is read: every partition counts as held.
func publishOptions(o *Options, taints func(string) []resourceapi.DeviceTaint, held func(string, *inventory.Partition) bool) publish.Options {
	return publish.Options{Partitioning: o.Partitioning, Sharing: o.Sharing, Profiles: o.Profiles, Window: o.DynamicWindow, Taints: taints, Held: held,
		Isolation:         o.isolation,
		MinShareIsolation: o.MinShareIsolation, WholeLegacyMPS: o.WholeLegacyMPS}
}

// isolation is how a share or MPS limit of partition p of g (nil: the
// whole GPU) is held on this node.
func (o *Options) isolation(g *inventory.GPU, p *inventory.Partition) isolation.Assessment {
	return isolation.Assess(vendors.Capabilities(g.Vendor), g, p, o.Host)
}

// start lets publishes send slices through send (the kubelet plugin
// helper).
func (p *publisher) start(send func(context.Context, resourceslice.DriverResources) error) {
	p.mu.Lock()
	p.send = send
	p.mu.Unlock()
}

// setHeld gives later builds what claims hold: partitions, and GPUs whole.
func (p *publisher) setHeld(held func(string, *inventory.Partition) bool, whole func(gpu string) bool) {
	p.mu.Lock()
	p.held, p.heldWhole = held, whole
	p.mu.Unlock()
}

// Published returns the slices built last; nil before the first build.
func (p *publisher) Published() *publish.Result {
	p.resMu.RLock()
	defer p.resMu.RUnlock()
	return p.published
}

// devices are what claims resolve devices against: the slices built last.
// Before the first build, which waits for claims recovery (it destroys
// partitions, and what it could not destroy is withheld), only recovery
// asks, to rebuild a corrupt checkpoint from CDI specs; it gets a build of
// the inventory discovered before it, every partition held. Should that
// build fail it gets no devices, and New fails with the error.
func (p *publisher) devices() *publish.Result {
	if res := p.Published(); res != nil {
		return res
	}
	res, err := publish.Build(p.opts.NodeName, p.inv, publishOptions(p.opts, p.taints, nil))
	if err != nil {
		p.earlyErr = err
		return &publish.Result{Devices: map[string]publish.Entry{}}
	}
	return res
}

// publish builds and sends the node's slices again for r and returns once a
// publish that started after the call did. If one is running, the call waits
// for the next, which takes every reason that arrived meanwhile: N callers
// during one publish cost one more, not N.
func (p *publisher) publish(ctx context.Context, r reason) error {
	p.mu.Lock()
	p.pending |= r
	if p.next == nil {
		p.next = &round{done: make(chan struct{})}
	}
	rd := p.next
	if p.busy {
		rd.waiters++
		p.mu.Unlock()
		select {
		case <-rd.done:
			return rd.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	p.busy = true
	p.mu.Unlock()
	p.drain(ctx)
	return rd.err
}

// drain runs publishes until no reason is pending. The caller that found
// none running runs it, so no goroutine outlives the callers.
func (p *publisher) drain(ctx context.Context) {
	for {
		p.mu.Lock()
		rd, r, send, held, whole, passed := p.next, p.pending, p.send, p.held, p.heldWhole, p.passed
		if rd == nil {
			p.busy = false
			p.mu.Unlock()
			return
		}
		p.next, p.pending = nil, unchanged
		p.mu.Unlock()
		rd.err = p.run(ctx, r, send, held, whole, passed)
		close(rd.done)
	}
}

// run is one publish: discover if the hardware may have changed, build if
// anything did, send if the slices differ from those last sent.
func (p *publisher) run(ctx context.Context, r reason, send func(context.Context, resourceslice.DriverResources) error, held func(string, *inventory.Partition) bool, whole func(string) bool, passed func() []publish.PassedGPU) error {
	if r&inventoryChanged != 0 || p.inv == nil {
		if err := p.discover(ctx); err != nil {
			return err
		}
	}
	res := p.Published()
	if r != unchanged || res == nil {
		var err error
		// The first send publishes every slice anyway.
		deferOpen := p.sent != nil && r&windowOpen == 0
		if res, err = p.build(ctx, held, whole, passed, deferOpen); err != nil {
			return err
		}
	}
	if send == nil {
		return nil
	}
	logger := klog.FromContext(ctx)
	// The label follows the inventory, whatever the slices do; a failure
	// is logged and the next publish tries again.
	if err := p.labeler.sync(ctx, p.inv); err != nil {
		logger.Error(err, "Label the node with its GPUs' fabric domain")
	}
	p.followDomain(ctx)
	if p.sent != nil && apiequality.Semantic.DeepEqual(*p.sent, res.Resources) {
		logger.V(4).Info("Devices unchanged, nothing to publish", "pool", res.Pool)
		return nil
	}
	// The hardware changes in steps (MIG mode, then the partition; the
	// partition, then MIG mode) and each step bumps the backend's
	// generation; only the steps that change the slices reach the helper,
	// whose controller, handed the same slices twice in quick succession,
	// may write them twice.
	if err := send(ctx, res.Resources); err != nil {
		return err
	}
	if p.sent != nil {
		logger.Info("Republished devices", "pool", res.Pool, "devices", len(res.Order))
	}
	p.sent = &res.Resources
	return nil
}

// discover reads the node's inventory from the backend. What discovery
// found wrong with a GPU (lost, a value unreadable) becomes a condition of
// the health tracker, so it reaches the GPU's taints in the build that
// follows; the GPUs it leaves unpublished are counted, and apart from them
// the published GPUs with a value it could not read.
func (p *publisher) discover(ctx context.Context) error {
	inv, err := p.opts.Backend.Discover(ctx)
	if err != nil {
		return fmt.Errorf("discover devices with backend %s: %w", p.opts.Backend.Name(), err)
	}
	for _, g := range inv.GPUs {
		if p.tracker.Discovered(g.UUID, g.Health) {
			h := p.tracker.Health(g.UUID)
			klog.FromContext(ctx).Info("Device health changed at discovery", "gpu", g.UUID, "health", h.State, "conditions", h.Reason)
		}
	}
	unpublished, unknown := map[string]int{}, map[string]int{}
	for _, u := range inv.Unpublished {
		if u.Value != "" {
			unknown[u.Value]++ // a published GPU, one value of it unknown
			continue
		}
		unpublished[string(u.Reason)]++
	}
	p.opts.Metrics.SetUnpublished(unpublished)
	p.opts.Metrics.SetUnknownValues(unknown)
	p.observe(ctx, inv)
	p.inv = inv
	return nil
}

// build builds the slices of the inventory discovered last and keeps them,
// with the window opened from what the build before opened.
func (p *publisher) build(ctx context.Context, held func(string, *inventory.Partition) bool, whole func(string) bool, passed func() []publish.PassedGPU, deferOpen bool) (*publish.Result, error) {
	o := publishOptions(p.opts, p.taints, held)
	o.HeldWhole, o.DeferOpen = whole, deferOpen
	o.Passed = p.passedNow(passed)
	if p.groups != nil {
		o.IOMMUGroup = p.iommuGroup
	}
	if open := p.open; open != nil {
		o.Open = func(gpu string) bool { return open[gpu] }
	}
	res, err := publish.Build(p.opts.NodeName, p.inv, o)
	if err != nil {
		return nil, err
	}
	p.open = res.Open
	p.resMu.Lock()
	p.published = res
	p.resMu.Unlock()
	if p.built != nil {
		p.built(ctx, res)
	}
	return res, nil
}

// followDomain runs for the IMEX channel lease of the inventory's domain,
// where the agent offers channels. The race outlives the publish that
// started it (it ends with stopChannels).
func (p *publisher) followDomain(ctx context.Context) {
	domain, _ := fabricDomain(p.inv)
	p.domain.Store(domain)
	if p.channels == nil {
		return
	}
	if err := p.channels.Follow(context.WithoutCancel(ctx), domain); err != nil {
		klog.FromContext(ctx).Error(err, "Offer the domain's IMEX channels")
	}
}

// stopChannels hands the domain's lease back, if held.
func (p *publisher) stopChannels() {
	if p.channels != nil {
		p.channels.Stop()
	}
}

// fabricDomain is the domain followDomain saw last ("" for none).
func (p *publisher) fabricDomain() string {
	d, _ := p.domain.Load().(string)
	return d
}
