package channelpool

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/names"
)

// LeasePrefix begins the name of each domain's lease (LeaseName).
const LeasePrefix = "tessera-imex-"

// LeaseName is the lease the agents of domain hold in turn: its holder
// publishes the domain's pool.
func LeaseName(domain string) string { return LeasePrefix + domain }

// Config is what a publisher needs of its agent.
type Config struct {
	Client kubernetes.Interface
	// Namespace holds the leases (the release's).
	Namespace string
	// Node is the agent's node: the lease's holder identity and the
	// slices' owner, so that they go with it when it is deleted.
	Node string
	// Channels is how many channels the pool offers (1..MaxChannels).
	Channels int
	// Timing of the lease; zero values take client-go's usual 15s/10s/2s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// Publisher keeps the channel pool of its node's domain published while
// the node's agent holds the domain's lease. Every agent of a domain runs
// one, and one at a time publishes: the pool has a single writer, and
// another agent takes over within a lease duration of the holder's end.
// A holder hands the lease back when it stops or its node leaves the
// domain, and leaves the slices to the next holder, which reconciles them
// as its own; the slices name their publisher's Node as owner, so they go
// with it should every agent of the domain go.
type Publisher struct {
	cfg Config

	mu     sync.Mutex
	domain string
	cancel context.CancelFunc
	done   chan struct{}
}

// NewPublisher checks cfg and returns a publisher following no domain.
func NewPublisher(cfg Config) (*Publisher, error) {
	if cfg.Client == nil || cfg.Namespace == "" || cfg.Node == "" {
		return nil, fmt.Errorf("IMEX channel publisher: a client, namespace and node are needed")
	}
	if cfg.Channels < 1 || cfg.Channels > MaxChannels {
		return nil, fmt.Errorf("IMEX channel publisher: %d channels per domain: want 1 to %d", cfg.Channels, MaxChannels)
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod = 15*time.Second, 10*time.Second, 2*time.Second
	}
	return &Publisher{cfg: cfg}, nil
}

// Follow makes the publisher stand for domain ("" for none): it leaves
// the race for the previous domain's lease and enters the new one's.
func (p *Publisher) Follow(ctx context.Context, domain string) error {
	if domain != "" {
		if err := CheckDomain(domain); err != nil {
			return err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if domain == p.domain {
		return nil
	}
	p.stopLocked()
	p.domain = domain
	if domain == "" {
		return nil
	}
	ctx, cancel := context.WithCancel(klog.NewContext(ctx, klog.FromContext(ctx).WithValues("fabricDomain", domain)))
	p.cancel, p.done = cancel, make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		p.elect(ctx, domain)
	}(p.done)
	return nil
}

// Stop leaves the race, handing the lease back where held.
func (p *Publisher) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopLocked()
	p.domain = ""
}

func (p *Publisher) stopLocked() {
	if p.cancel != nil {
		p.cancel()
		<-p.done
		p.cancel, p.done = nil, nil
	}
}

// elect runs for domain's lease until ctx ends, publishing while held.
func (p *Publisher) elect(ctx context.Context, domain string) {
	logger := klog.FromContext(ctx)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: LeaseName(domain), Namespace: p.cfg.Namespace},
		Client:     p.cfg.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: p.cfg.Node},
	}
	for ctx.Err() == nil {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock:            lock,
			ReleaseOnCancel: true,
			LeaseDuration:   p.cfg.LeaseDuration,
			RenewDeadline:   p.cfg.RenewDeadline,
			RetryPeriod:     p.cfg.RetryPeriod,
			Name:            LeaseName(domain),
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) { p.publish(ctx, domain) },
				OnStoppedLeading: func() { logger.V(2).Info("Not publishing the domain's IMEX channels") },
			},
		})
		// RunOrDie returns when leadership is lost (or ctx ended): run
		// for the lease again.
	}
}

// publish keeps the pool published until ctx ends (leadership lost).
func (p *Publisher) publish(ctx context.Context, domain string) {
	logger := klog.FromContext(ctx)
	pool, err := Pool(domain, p.cfg.Channels)
	if err != nil {
		logger.Error(err, "IMEX channel pool")
		return
	}
	name := PoolName(domain)
	ctl, err := resourceslice.StartController(ctx, resourceslice.Options{
		DriverName:            names.DriverName,
		KubeClient:            p.cfg.Client,
		Owner:                 &resourceslice.Owner{APIVersion: "v1", Kind: "Node", Name: p.cfg.Node},
		ReconcilePoolWithName: name,
		Resources:             &resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{name: pool}},
		ErrorHandler: func(ctx context.Context, err error, msg string) {
			klog.FromContext(ctx).Error(err, msg, "pool", name)
		},
	})
	if err != nil {
		logger.Error(err, "Publish the domain's IMEX channels", "pool", name)
		return
	}
	logger.Info("Publishing the domain's IMEX channels", "pool", name, "channels", p.cfg.Channels)
	<-ctx.Done()
	ctl.Stop()
}
