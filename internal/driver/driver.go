package driver

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/cdi"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/claims"
	"github.com/tessera-gpu/tessera/internal/health"
	"github.com/tessera-gpu/tessera/internal/imex"
	"github.com/tessera-gpu/tessera/internal/isolation"
	"github.com/tessera-gpu/tessera/internal/metrics"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/vfio"
)

// The API client's default rate limit (the agent's --kube-api-qps and
// --kube-api-burst): the helper GETs every claim before a prepare, so QPS
// caps sustained prepares per second (BenchmarkPrepareThroughput/default-limit).
const (
	DefaultKubeAPIQPS   = 200
	DefaultKubeAPIBurst = 400
)

// Options configure the node agent.
type Options struct {
	NodeName      string
	Backend       backend.Backend
	KubeClient    kubernetes.Interface
	PluginDataDir string // kubelet plugin dir for this driver: socket and checkpoint
	RegistrarDir  string // kubelet plugin registry dir
	CDIDir        string
	// VendorCDIDirs are searched for the node's NVIDIA CDI spec (see
	// cdi.Options.VendorSpecDirs); empty for the simulator.
	VendorCDIDirs  []string
	CheckpointPath string // default PluginDataDir/checkpoint.json
	BootID         string
	// InventoryPoll is how often a backend that can change under the agent
	// (backend.Generationer) is asked whether it did; 5s when zero.
	InventoryPoll time.Duration
	// Fatal is called for errors the agent cannot recover from; it should
	// stop the process (the main cancels its context).
	Fatal func(error)
	// Metrics, if set, records prepares, published devices, partition
	// operations and health events; nil records nothing.
	Metrics *metrics.Metrics
	// Partitioning is how MIG-capable GPUs are published (static when empty).
	Partitioning publish.Partitioning
	// Sharing says whether devices are published multi-allocatable
	// (capacity shares); none when empty.
	Sharing publish.Sharing
	// Host is what the node's cgroups offer for device memory limits: how
	// each device's shares are held (memoryIsolation, ShareEnforced).
	Host isolation.Host
	// MinShareIsolation: shares only where held at least this strongly
	// (publish.Options.MinShareIsolation).
	MinShareIsolation isolation.Level
	// Standby, when set, is the kubelet plugin this agent registered while
	// it waited for the node's lock; Start takes it over instead of
	// registering one.
	Standby *Standby
	// WholeLegacyMPS: publish whole the devices whose shares would reach a
	// shared MPS control pipe (publish.Options.WholeLegacyMPS).
	WholeLegacyMPS bool
	// Profiles restricts the MIG profiles a dynamic GPU publishes
	// (publish.Options.Profiles); empty publishes all.
	Profiles []string
	// DynamicWindow is how many GPUs without partitions publish their
	// placements on a dynamic node (publish.Options.Window); 0 publishes
	// every GPU's.
	DynamicWindow int
	// OrphanRetry is how often, on a dynamic node, partitions that no claim
	// holds and that the start-up sweep could not destroy are tried again;
	// one minute when zero.
	OrphanRetry time.Duration
	// Health is the health policy (internal/health); the default policy when
	// its Window is zero.
	Health health.Policy
	// SharingCheck is how often the MPS daemons of prepared claims are
	// checked and started again if one died; 30s when zero.
	SharingCheck time.Duration
	// DrainTimeout is how long Stop lets the kubelet's calls in flight
	// finish (DefaultDrainTimeout when zero).
	DrainTimeout time.Duration
	// IMEXChannels, above 0, is how many IMEX channels the agent offers
	// for its node's multi-node NVLink domain while it holds the domain's
	// lease in IMEXNamespace (internal/channelpool); 0 publishes none.
	IMEXChannels  int
	IMEXNamespace string
	// IMEXHost is the node's IMEX (channels and daemon), which a claim of
	// a channel needs; nil with IMEXChannels 0.
	IMEXHost *imex.Host
	// IMEXDaemon, where the agent runs the node's IMEX daemon
	// (--imex-daemons=pod), starts and stops it for the claims of
	// channels; nil where the host runs it.
	IMEXDaemon claims.IMEXDaemon
	// IMEXAddress, where set, is the address the node's IMEX peers reach
	// it at, annotated on the node beside its domain label.
	IMEXAddress string
	// Passthrough lets claims of the vfio class pass GPUs through to
	// virtual machines, and publishes iommuGroup on the GPUs that can be
	// passed (docs/vfio.md).
	Passthrough bool
	// VFIO is the node's PCI sysfs (the host's, or the simulator's tree),
	// set whatever Passthrough says: GPUs passed before a restart with it
	// off still go back to their drivers.
	VFIO vfio.Sysfs
	// DeviceMetadata writes each prepared device's attributes into the
	// file the kubelet mounts into its containers (KEP-5304; metadata.go).
	DeviceMetadata bool
}

// Driver implements kubeletplugin.DRAPlugin.
type Driver struct {
	opts    Options
	claims  *claims.Manager
	health  *healthHub
	tracker *health.Tracker
	pub     *publisher
	modes   string // last logged GPU publishing modes; publishes only
	// unshared is the devices last logged as published whole under
	// --sharing=capacity, with why (logUnshared); publishes only.
	unshared string
	// imex is the node's IMEX daemon's last answer (imexhealth.go).
	imexState imexHealth

	helper *kubeletplugin.Helper
	// readyPool confirms, for readiness, that the API server holds the
	// node's pool (Ready).
	readyPool *confirmation
	// healthStop ends the backend's health watch; healthDone is closed
	// when it returned.
	healthStop context.CancelFunc
	healthDone chan struct{}
	// calls are the kubelet's calls in flight, which Stop drains.
	calls inflight
	// passSeen is the claims' PassthroughChanges the node last
	// republished for (followPassthrough).
	passSeen atomic.Uint64
}

var _ kubeletplugin.DRAPlugin = (*Driver)(nil)

// withDefaults fills the options left zero that have a default.
func (o Options) withDefaults() Options {
	if o.CheckpointPath == "" {
		o.CheckpointPath = o.PluginDataDir + "/checkpoint.json"
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	if o.Health.Window <= 0 {
		o.Health = health.DefaultPolicy()
	}
	return o
}

// New discovers the node, recovers the checkpoint and builds the slices; it
// starts nothing. Start connects it to the kubelet.
func New(ctx context.Context, o Options) (*Driver, error) {
	o = o.withDefaults()
	d := &Driver{opts: o, tracker: health.NewTracker(o.Health)}
	d.readyPool = newConfirmation(d.poolPublished, readyTTL)
	d.pub = newPublisher(&d.opts, d.tracker)
	d.pub.built = d.built
	if err := d.pub.discover(ctx); err != nil {
		return nil, err
	}
	w, err := cdi.NewWriter(cdi.Options{SpecDir: o.CDIDir, DevRoot: o.Backend.DevRoot(), DeviceNumbers: o.Backend.DeviceNumbers, VendorSpecDirs: o.VendorCDIDirs})
	if err != nil {
		return nil, fmt.Errorf("CDI spec dir %s: %w", o.CDIDir, err)
	}
	d.claims, err = claims.New(ctx, claims.Config{
		DriverName:      names.DriverName,
		Backend:         o.Backend,
		CDI:             w,
		Store:           checkpoint.NewStore(o.CheckpointPath),
		BootID:          o.BootID,
		Devices:         d.pub.devices,
		Partitioning:    o.Partitioning,
		Isolation:       o.isolation,
		MemoryLimits:    o.memoryLimits(),
		OrphanDestroyed: o.Metrics.OrphanDestroyed,
		MPSRestarted:    o.Metrics.MPSRestarted,
		GetClaim:        getClaim(o.KubeClient),
		Released: func(ev claims.Evidence, uid string, c claims.ClaimRef) {
			o.Metrics.StaleClaimReleased(releasedLabel(ev))
			d.removeMetadata(klog.FromContext(ctx), uid, c)
		},
		ObservePartition: func(op claims.PartitionOp, took time.Duration, err error) {
			o.Metrics.ObservePartition(string(op), took, err)
		},
		IMEX: d.imex(), VFIO: o.VFIO, Passthrough: o.Passthrough, DeviceMetadata: o.DeviceMetadata,
	})
	if err != nil {
		return nil, err
	}
	if err := d.pub.earlyErr; err != nil {
		return nil, err
	}
	d.sweepMetadata(ctx)
	// The first build waits for the checkpoint: what claims hold decides
	// what a dynamic GPU withholds. It discovers the node again, whatever
	// its partitioning: recovery may have changed it after the manager's
	// first look (destroyed partitions on a dynamic node, given back a GPU
	// a passthrough cut short left on no driver on any node).
	d.pub.setHeld(d.claims.Holds, d.claims.HoldsWhole)
	d.pub.setPassed(d.claims.Passed)
	if o.Partitioning == publish.Dynamic && o.DynamicWindow > 0 {
		d.pub.open = previouslyOpen(ctx, o)
	}
	r := heldChanged | inventoryChanged
	if err := d.pub.publish(ctx, r); err != nil {
		return nil, err
	}
	o.Metrics.SetPreparedSource(d.claims.Counts)
	o.Metrics.SetSharingSource(d.claims.SharingCounts)
	o.Metrics.SetCapacitySource(d.sharedDevices)
	d.health = newHealthHub(d.Published, o.Metrics, d.tracker)
	d.health.extra = d.channelHealth
	d.health.republish = func(ctx context.Context) error { return d.pub.publish(ctx, taintsChanged) }
	return d, nil
}

// built logs how the GPUs are published, and which devices are published
// whole under --sharing=capacity, when that changed, and counts the
// devices.
func (d *Driver) built(ctx context.Context, res *publish.Result) {
	modes := fmt.Sprint(res.Modes)
	if modes != d.modes {
		d.modes = modes
		logger := klog.FromContext(ctx)
		for _, m := range res.Modes {
			logger.Info("Partitionable GPU", "device", m.Device, "uuid", m.UUID, "published", m.Mode, "reason", m.Reason)
			if len(m.Withheld) > 0 {
				logger.Info("Partitions no claim holds: their memory slices are withheld from the scheduler until they are gone", "device", m.Device, "partitions", m.Withheld)
			}
		}
	}
	d.logUnshared(klog.FromContext(ctx), res)
	d.opts.Metrics.SetPublished(publishedCounts(res))
	d.opts.Metrics.SetMemorySlices(memorySlices(res))
}

// Published returns the devices built last.
func (d *Driver) Published() *publish.Result { return d.pub.Published() }

// PrepareResourceClaims prepares each claim on its own: one claim's failure
// is reported for that claim and does not stop the others.
func (d *Driver) PrepareResourceClaims(ctx context.Context, cs []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	if err := d.calls.enter(); err != nil {
		return nil, err
	}
	defer d.calls.leave()
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(cs))
	for _, c := range cs {
		start := time.Now()
		devs, err := d.claims.Prepare(ctx, c)
		d.opts.Metrics.ObservePrepare(time.Since(start), errorReason(err))
		d.reportPrepare(ctx, c, devs, err)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Prepare failed", "claim", klog.KObj(c))
			out[c.UID] = kubeletplugin.PrepareResult{Err: err}
			continue
		}
		out[c.UID] = prepareResult(string(c.UID), devs)
	}
	d.followWindow(ctx)
	d.followPassthrough(ctx)
	return out, nil
}

// prepareResult is what the kubelet is told of a prepared claim: each
// device with its CDI IDs and, for a claim whose requests have their own
// claim-level CDI devices, one more entry (the last device again) under
// cdi.WholeClaimRequest with the claim-wide ones, which the kubelet gives
// only to containers naming the whole claim, after their devices' IDs
// (internal/cdi/scope.go).
func prepareResult(claimUID string, devs []claims.Device) kubeletplugin.PrepareResult {
	res := kubeletplugin.PrepareResult{Devices: make([]kubeletplugin.Device, 0, len(devs)+1)}
	ids := make([][]string, 0, len(devs))
	for _, dv := range devs {
		kd := kubeletplugin.Device{Requests: dv.Requests, PoolName: dv.Pool, DeviceName: dv.Name, CDIDeviceIDs: dv.CDIDeviceIDs}
		if dv.Metadata != nil {
			kd.Metadata = &kubeletplugin.DeviceMetadata{Attributes: dv.Metadata}
		}
		if dv.ShareID != "" {
			id := types.UID(dv.ShareID)
			kd.ShareID = &id
		}
		res.Devices = append(res.Devices, kd)
		ids = append(ids, dv.CDIDeviceIDs)
	}
	if whole := cdi.WholeClaimIDs(claimUID, ids); len(whole) > 0 {
		last := res.Devices[len(res.Devices)-1]
		// Its metadata is the device's: the helper writes a file for it
		// too, under the request name cdi.WholeClaimRequest, which only
		// a container naming the whole claim mounts (docs/claims.md).
		res.Devices = append(res.Devices, kubeletplugin.Device{
			Requests: []string{cdi.WholeClaimRequest}, PoolName: last.PoolName, DeviceName: last.DeviceName,
			ShareID: last.ShareID, CDIDeviceIDs: whole, Metadata: last.Metadata,
		})
	}
	return res
}

// UnprepareResourceClaims unprepares each claim on its own.
func (d *Driver) UnprepareResourceClaims(ctx context.Context, cs []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	if err := d.calls.enter(); err != nil {
		return nil, err
	}
	defer d.calls.leave()
	out := make(map[types.UID]error, len(cs))
	for _, c := range cs {
		start := time.Now()
		out[c.UID] = d.claims.Unprepare(ctx, string(c.UID), c.Namespace, c.Name)
		d.opts.Metrics.ObserveUnprepare(time.Since(start), errorReason(out[c.UID]))
		if out[c.UID] != nil {
			klog.FromContext(ctx).Error(out[c.UID], "Unprepare failed", "claim", c.NamespacedName)
		}
	}
	d.followPassthrough(ctx)
	return out, nil
}

// HandleError logs background errors; fatal ones stop the agent so its
// supervisor restarts it.
func (d *Driver) HandleError(ctx context.Context, err error, msg string) {
	runtime.HandleErrorWithContext(ctx, err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) && d.opts.Fatal != nil {
		d.opts.Fatal(fmt.Errorf("%s: %w", msg, err))
	}
}

// imex is what claims of IMEX channels need of the node; nil where the
// agent offers no channels.
func (d *Driver) imex() *claims.IMEX {
	h := d.opts.IMEXHost
	if h == nil {
		return nil
	}
	return &claims.IMEX{Domain: d.pub.fabricDomain, Channels: h.Channels, Status: h.Status, Daemon: d.opts.IMEXDaemon}
}
