package amdsysfs

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// Options configure the AMD backend.
type Options struct {
	// SysfsRoot is the directory that plays the role of / for sysfs reads:
	// "/" on a host, a captured tree in tests and --dry-run.
	SysfsRoot string
	// Logger receives the reasons a GPU was degraded or left out.
	Logger klog.Logger
	// HealthPollInterval is how often WatchHealth checks every GPU's PCI
	// device directory and RAS error counters (30 s when zero).
	HealthPollInterval time.Duration
}

// Backend is the AMD backend. It is safe for concurrent use.
type Backend struct {
	root fsRoot
	log  klog.Logger
	// healthPoll is WatchHealth's interval; healthPolled, when set (by
	// tests, before WatchHealth starts), is called after every poll.
	healthPoll   time.Duration
	healthPolled func()

	mu sync.Mutex
	// gen and node cache the last inventory; Discover re-reads only when
	// KFD's generation_id moves (hot plug, partition mode change).
	gen  string
	node *inventory.Node
	// said is what record last logged per GPU, value and reason, so each
	// is said once rather than at every re-read.
	said map[string]string
	// degraded are the last read's "AMD GPU degraded" lines, by GPU and
	// text: a line still true at the next read is not said again.
	degraded map[string]bool
}

var _ backend.Backend = (*Backend)(nil)

// ErrNotSupported is returned for partition changes: AMD compute partition
// modes are host-wide settings changed by an administrator.
var ErrNotSupported = errors.New("not supported: change the compute partition mode with amd-smi")

// New returns an AMD backend reading below o.SysfsRoot.
func New(o Options) (*Backend, error) {
	if o.SysfsRoot == "" {
		o.SysfsRoot = "/"
	}
	if ok, reason := Detect(o.SysfsRoot); !ok {
		return nil, fmt.Errorf("amd backend: %s", reason)
	}
	if o.HealthPollInterval <= 0 {
		o.HealthPollInterval = defaultHealthPoll
	}
	return &Backend{root: fsRoot(o.SysfsRoot), log: o.Logger, healthPoll: o.HealthPollInterval, said: map[string]string{}}, nil
}

// Detect reports whether the KFD topology exists below sysfsRoot, for
// --backend=auto; reason says what was found or missing.
func Detect(sysfsRoot string) (ok bool, reason string) {
	r := fsRoot(sysfsRoot)
	if !r.exists(path.Join(topologyDir, "generation_id")) {
		return false, fmt.Sprintf("no KFD topology at %s (amdgpu not loaded, or not an AMD GPU host)", r.path(topologyDir))
	}
	return true, fmt.Sprintf("KFD topology found at %s", r.path(topologyDir))
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return "amd" }

// DevRoot implements backend.Backend: AMD device nodes are the host's.
func (b *Backend) DevRoot() string { return "/dev" }

// DeviceNumbers implements backend.Backend: the runtime stats real nodes.
func (b *Backend) DeviceNumbers(string) (int64, int64, bool) { return 0, 0, false }

// Generation returns KFD's generation_id, which the kernel bumps whenever
// the topology changes. The agent polls it and calls Discover (and
// republishes) when it moves.
func (b *Backend) Generation() (string, error) {
	return b.root.readString(path.Join(topologyDir, "generation_id"))
}

// Discover implements backend.Backend. The inventory is cached by
// generation_id; the returned Node is the caller's to keep (a copy).
func (b *Backend) Discover(ctx context.Context) (*inventory.Node, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	gen, err := b.Generation()
	if err != nil {
		return nil, fmt.Errorf("amd: %w", err)
	}
	if b.node != nil && gen == b.gen {
		return b.node.Clone(), nil
	}
	// A topology change while reading shows up as a different
	// generation_id afterwards: read again (a few times at most).
	for range 3 {
		n, err := b.read()
		if err != nil {
			return nil, err
		}
		after, err := b.Generation()
		if err != nil {
			return nil, fmt.Errorf("amd: %w", err)
		}
		if after == gen {
			b.gen, b.node = gen, n
			return n.Clone(), nil
		}
		gen = after
	}
	return nil, fmt.Errorf("amd: KFD topology kept changing while being read (generation_id now %s)", gen)
}

// read builds the inventory from sysfs, logging every degraded GPU and
// recording (record) every GPU left out and every value left unknown.
func (b *Backend) read() (*inventory.Node, error) {
	_, nodes, bad, err := readTopology(b.root)
	if err != nil {
		return nil, fmt.Errorf("amd: %w", err)
	}
	cards, badCards := groupCards(b.root, nodes)
	out := &inventory.Node{}
	for _, e := range append(bad, badCards...) {
		b.leftOut(out, e)
	}
	cpuNodes := map[int]bool{}
	for _, n := range nodes {
		if !n.isGPU() {
			cpuNodes[n.ID] = true
		}
	}
	driver := driverVersion(b.root)
	owner := map[int]int{}
	degraded := map[string]bool{}
	defer func() { b.degraded = degraded }()
	models := unidentified{}
	for _, c := range cards {
		warn := func(format string, args ...any) {
			b.sayDegraded(degraded, c.bdf(), fmt.Sprintf(format, args...))
		}
		unk := unknowns{}
		g := buildGPU(b.root, c, cpuNodes, warn, unk)
		g.DriverVersion = driver
		for _, n := range c.Nodes {
			owner[n.ID] = len(out.GPUs)
		}
		out.GPUs = append(out.GPUs, g)
		models.add(unk.why(inventory.ValueModel), g.PCIBusID)
		for _, v := range unk.values() {
			b.record(out, inventory.Unpublished{GPU: g.PCIBusID, Reason: inventory.UnpublishedUnreadable, Value: v, Message: unk.why(v)})
		}
	}
	var unknownBW map[int]string
	out.Links, unknownBW = xgmiLinks(nodes, owner)
	for gi := range out.GPUs {
		if why, ok := unknownBW[gi]; ok {
			b.record(out, inventory.Unpublished{GPU: out.GPUs[gi].PCIBusID, Reason: inventory.UnpublishedUnreadable, Value: inventory.ValueFabricBandwidth, Message: why})
		}
	}
	pairDies(out.GPUs, out.Links)
	b.sayUnidentified(models)
	return out, nil
}

// sayDegraded logs why a GPU is published with less than it should, once:
// not again within this read (a card's first partition and the card can
// meet the same problem), nor at a later read while it stays true, the
// way record says unknown values. now collects this read's lines.
func (b *Backend) sayDegraded(now map[string]bool, gpu, why string) {
	key := gpu + "|" + why
	if now[key] {
		return
	}
	now[key] = true
	if !b.degraded[key] {
		b.log.Info("AMD GPU degraded", "pciBusID", gpu, "reason", why)
	}
}

// leftOut records a KFD node that publishes nothing.
func (b *Backend) leftOut(out *inventory.Node, err error) {
	u := inventory.Unpublished{Reason: inventory.UnpublishedUnreadable, Message: err.Error()}
	var ne *nodeError
	if errors.As(err, &ne) {
		u.GPU, u.Reason = fmt.Sprintf("KFD node %d", ne.node), ne.reason
	}
	b.record(out, u)
}

// record keeps u on the node, where the agent counts it, and logs it once
// per GPU, value and reason: Discover reads again at every generation
// change, and the same line each time would bury the first. logr has no
// warning level; this is the always-on level (V(0)), and the metric
// carries the count.
func (b *Backend) record(out *inventory.Node, u inventory.Unpublished) {
	out.Unpublished = append(out.Unpublished, u)
	if u.Value == inventory.ValueModel {
		return // counted per GPU, said per device ID: sayUnidentified
	}
	key := u.GPU + "|" + u.Value + "|" + string(u.Reason)
	if said, ok := b.said[key]; ok && said == u.Message {
		return
	}
	b.said[key] = u.Message
	switch u.Value {
	case "":
		b.log.Info("AMD GPU left out", "gpu", u.GPU, "reason", u.Reason, "detail", u.Message)
	default:
		b.log.Info("AMD GPU value unknown; left out of its devices rather than published as 0", "pciBusID", u.GPU, "value", u.Value, "detail", u.Message)
	}
}

var versionRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+){0,2}`)

// driverVersion reads the amdgpu module version (present with the
// amdgpu-dkms driver; the in-tree driver has none, and then the attribute
// is left out). It keeps the leading numeric x.y.z so it is a semver.
func driverVersion(r fsRoot) string {
	s, err := r.readString("sys/module/amdgpu/version")
	if err != nil {
		return ""
	}
	v := versionRE.FindString(s)
	if v == "" {
		return ""
	}
	for strings.Count(v, ".") < 2 {
		v += ".0"
	}
	return v
}

// CreatePartition implements backend.Backend. Compute partitions follow
// the card's mode, which this backend does not change.
func (b *Backend) CreatePartition(context.Context, string, string, inventory.Placement) (*inventory.Partition, error) {
	return nil, fmt.Errorf("amd: creating a partition: %w", ErrNotSupported)
}

// DestroyPartition implements backend.Backend; see CreatePartition.
func (b *Backend) DestroyPartition(context.Context, string, string) error {
	return fmt.Errorf("amd: destroying a partition: %w", ErrNotSupported)
}

// SetPartitionMode implements backend.Backend; see CreatePartition.
func (b *Backend) SetPartitionMode(context.Context, string, bool) error {
	return fmt.Errorf("amd: changing the compute partition mode: %w", ErrNotSupported)
}

// WatchHealth is in health.go.
