package metrics

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

const namespace = "tessera"

// Buckets for prepare and unprepare: a prepare is a claim GET's worth of
// work plus two fsynced checkpoint writes and a CDI spec, milliseconds on a
// healthy node; the upper buckets catch a slow disk or API server.
var claimBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// Buckets for partition carve and destroy: MIG and compute-partition
// changes take from milliseconds (simulator) to tens of seconds (a GPU
// reset on real hardware).
var partitionBuckets = []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

// DeviceKey is one `tessera_published_devices` series.
type DeviceKey struct {
	Vendor, Model, Type string
}

// PreparedFunc returns the claims prepared now and the devices they hold.
type PreparedFunc func() (claims, devices int)

// Metrics is the agent's set of metrics on its own registry.
type Metrics struct {
	reg *prometheus.Registry

	prepareDuration    *prometheus.HistogramVec
	unprepareDuration  *prometheus.HistogramVec
	prepareErrors      *prometheus.CounterVec
	unprepareErrors    *prometheus.CounterVec
	published          *prometheus.GaugeVec
	partitionDuration  *prometheus.HistogramVec
	healthEvents       *prometheus.CounterVec
	orphans            prometheus.Counter
	prepared           *preparedCollector
	sharing            *sharingCollector
	capacity           *capacityCollector
	allocation         *allocationCollector
	podResourcesErrors prometheus.Counter
	telemetry          *telemetryCollector
	telemetryFailures  prometheus.Counter
	mpsRestarts        prometheus.Counter
	staleReleased      *prometheus.CounterVec
	taints             *prometheus.GaugeVec
	freeSlices         *prometheus.GaugeVec
	unusableSlices     *prometheus.GaugeVec
	unhealthy          prometheus.Gauge
	imexReady          *prometheus.GaugeVec
	unpublished        *prometheus.GaugeVec
	unknownValues      *prometheus.GaugeVec
	ready              atomic.Pointer[func(context.Context) error]
}

// New creates the metrics and registers them, with the Go runtime and
// process collectors, on a new registry.
func New() *Metrics {
	m := &Metrics{
		reg:           prometheus.NewRegistry(),
		prepared:      newPreparedCollector(),
		sharing:       newSharingCollector(),
		capacity:      newCapacityCollector(),
		allocation:    newAllocationCollector(),
		telemetry:     newTelemetryCollector(),
		unpublished:   newUnpublished(),
		unknownValues: newUnknownValues(),
	}
	m.newClaimSeries()
	m.newDeviceSeries()
	m.newAgentSeries()
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.prepareDuration, m.unprepareDuration, m.prepareErrors, m.unprepareErrors,
		m.published, m.partitionDuration, m.healthEvents, m.orphans, m.prepared,
		m.sharing, m.capacity, m.mpsRestarts, m.taints, m.unhealthy, m.imexReady, m.staleReleased, m.freeSlices, m.unusableSlices,
		m.allocation, m.podResourcesErrors, m.telemetry, m.telemetryFailures, m.unpublished, m.unknownValues,
	)
	// Series that exist from the start, so a dashboard shows 0 rather than
	// "no data" and increase() counts the first event.
	for _, r := range []string{resultSuccess, resultError} {
		m.prepareDuration.WithLabelValues(r)
		m.unprepareDuration.WithLabelValues(r)
	}
	for _, r := range Reasons {
		m.prepareErrors.WithLabelValues(r)
		m.unprepareErrors.WithLabelValues(r)
	}
	for _, e := range Released {
		m.staleReleased.WithLabelValues(e)
	}
	return m
}

// newClaimSeries makes the series of prepares and unprepares.
func (m *Metrics) newClaimSeries() {
	m.prepareDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "prepare_duration_seconds",
		Help:    "Time to prepare one ResourceClaim (NodePrepareResources, per claim), by result.",
		Buckets: claimBuckets,
	}, []string{labelResult})
	m.unprepareDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "unprepare_duration_seconds",
		Help:    "Time to unprepare one ResourceClaim (NodeUnprepareResources, per claim), by result.",
		Buckets: claimBuckets,
	}, []string{labelResult})
	m.prepareErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "prepare_errors_total",
		Help: "ResourceClaim prepares that failed, by reason.",
	}, []string{labelReason})
	m.unprepareErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "unprepare_errors_total",
		Help: "ResourceClaim unprepares that failed, by reason.",
	}, []string{labelReason})
	m.staleReleased = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "stale_claims_released_total",
		Help: "Prepared claims unprepared by the agent for another claim allocated their devices, by the evidence that they were gone (unconfirmed after a reboot; deleted, replaced or deallocated in the API server).",
	}, []string{"evidence"})
}

// newDeviceSeries makes the series of what the node publishes and how its
// devices fare: health, taints, partitions and their room.
func (m *Metrics) newDeviceSeries() {
	m.published = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "published_devices",
		Help: "Devices in this node's ResourceSlices, by vendor, model and type (gpu or partition).",
	}, []string{"vendor", "model", "type"})
	m.partitionDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "partition_operation_duration_seconds",
		Help:    "Time of backend partition operations (carve, destroy), by result.",
		Buckets: partitionBuckets,
	}, []string{"operation", labelResult})
	m.healthEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "health_events_total",
		Help: "Device health signals from the backend, by kind (xid, ecc-sbe, ecc-dbe, ras-ue, ras-ce, row-remap-pending, lost, recovered, ...) and, for XIDs, the code.",
	}, []string{"kind", "code"})
	m.orphans = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "orphan_partitions_destroyed_total",
		Help: "Partitions on dynamically partitioned GPUs that no prepared claim owned, destroyed at start (cut by hand, or left by a crash the checkpoint could not explain).",
	})
	m.taints = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "gpu_taints",
		Help: "GPUs with a health condition, by the taint key it publishes (on the GPU and its partitions) and its effect.",
	}, []string{"key", "effect"})
	m.freeSlices = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "mig_free_memory_slices",
		Help: "Memory slices of a dynamically partitioned GPU that no MIG partition takes.",
	}, []string{"device"})
	m.unusableSlices = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "mig_unusable_memory_slices",
		Help: "Free memory slices of a dynamically partitioned GPU that no placement of a published profile can use now (fragmentation): the partitions that exist leave every placement over them short of slices or compute.",
	}, []string{"device"})
	m.unhealthy = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "gpus_unhealthy",
		Help: "GPUs reported Unhealthy to the kubelet (a NoExecute or NoSchedule condition other than degradation).",
	})
	m.imexReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "imex_daemon_ready",
		Help: "Whether the node's IMEX daemon answered READY when last asked (1) or not (0), by multi-node NVLink domain; absent on a node that offers no IMEX channels or is in no domain, and where the agent runs the daemon (--imex-daemons=pod), while no claim there holds a channel (none runs).",
	}, []string{"domain"})
}

// newAgentSeries makes the series of the agent's own polls and daemons.
func (m *Metrics) newAgentSeries() {
	m.podResourcesErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "pod_resources_errors_total",
		Help: "Polls of the kubelet's PodResources API that failed (socket missing, kubelet restarting); tessera_device_allocation_info keeps the last answer for a few of them.",
	})
	m.telemetryFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "telemetry_poll_failures_total",
		Help: "Telemetry polls of the backend that read nothing (the tessera_gpu_* gauges keep the last poll's readings for a few of them).",
	})
	m.mpsRestarts = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "mps_daemon_restarts_total",
		Help: "MPS control daemons of prepared claims found not running (died, or lost to a reboot) and started again by the agent.",
	})
}

// Registry is the registry the metrics are on (tests, extra collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ObservePrepare records one claim's prepare. reason is "" on success, else
// one of Reasons.
func (m *Metrics) ObservePrepare(took time.Duration, reason string) {
	if m == nil {
		return
	}
	observeClaim(m.prepareDuration, m.prepareErrors, took, reason)
}

// ObserveUnprepare records one claim's unprepare, as ObservePrepare.
func (m *Metrics) ObserveUnprepare(took time.Duration, reason string) {
	if m == nil {
		return
	}
	observeClaim(m.unprepareDuration, m.unprepareErrors, took, reason)
}

func observeClaim(h *prometheus.HistogramVec, errs *prometheus.CounterVec, took time.Duration, reason string) {
	if reason == "" {
		h.WithLabelValues(resultSuccess).Observe(took.Seconds())
		return
	}
	h.WithLabelValues(resultError).Observe(took.Seconds())
	errs.WithLabelValues(knownReason(reason)).Inc()
}

// knownReason keeps the reason label to the fixed set even if a caller
// passes something else.
func knownReason(r string) string {
	for _, k := range Reasons {
		if r == k {
			return r
		}
	}
	return ReasonOther
}

// ObservePartition records one backend partition operation (OpCarve or
// OpDestroy).
func (m *Metrics) ObservePartition(op string, took time.Duration, err error) {
	if m == nil {
		return
	}
	res := resultSuccess
	if err != nil {
		res = resultError
	}
	m.partitionDuration.WithLabelValues(op, res).Observe(took.Seconds())
}

// OrphanDestroyed counts one partition the start-up sweep destroyed.
func (m *Metrics) OrphanDestroyed() {
	if m == nil {
		return
	}
	m.orphans.Inc()
}

// StaleClaimReleased counts one prepared claim released for another claim
// allocated its devices, by evidence (one of Released; anything else is
// not counted, so the label stays a fixed set).
func (m *Metrics) StaleClaimReleased(evidence string) {
	if m == nil || !slices.Contains(Released, evidence) {
		return
	}
	m.staleReleased.WithLabelValues(evidence).Inc()
}

// HealthEvent counts one device health signal; code is the XID number for
// XIDs and empty otherwise.
func (m *Metrics) HealthEvent(kind, code string) {
	if m == nil {
		return
	}
	if kind == "" {
		kind = "unknown"
	}
	m.healthEvents.WithLabelValues(kind, code).Inc()
}

// SetPublished replaces the published device counts. Series of devices no
// longer published go, so a model that left the node does not linger.
func (m *Metrics) SetPublished(counts map[DeviceKey]int) {
	if m == nil {
		return
	}
	// Reset and Set are not one atomic step; a scrape in between sees a
	// partial set once, which the next scrape corrects. Republishes are rare.
	m.published.Reset()
	for k, n := range counts {
		m.published.WithLabelValues(k.Vendor, k.Model, k.Type).Set(float64(n))
	}
}

// SetPreparedSource sets where the prepared claims and devices gauges are
// read from at scrape time: the checkpoint, so they are right after a
// restart without replaying anything.
func (m *Metrics) SetPreparedSource(f PreparedFunc) {
	if m == nil {
		return
	}
	m.prepared.set(f)
}

// preparedCollector reads the prepared gauges at scrape time.
type preparedCollector struct {
	claims, devices *prometheus.Desc

	mu  sync.Mutex
	src PreparedFunc
}

func newPreparedCollector() *preparedCollector {
	return &preparedCollector{
		claims:  prometheus.NewDesc(namespace+"_prepared_claims", "ResourceClaims prepared on this node (checkpoint state PrepareCompleted).", nil, nil),
		devices: prometheus.NewDesc(namespace+"_prepared_devices", "Devices held by the prepared ResourceClaims on this node.", nil, nil),
	}
}

func (c *preparedCollector) set(f PreparedFunc) {
	c.mu.Lock()
	c.src = f
	c.mu.Unlock()
}

func (c *preparedCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.claims
	ch <- c.devices
}

func (c *preparedCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	src := c.src
	c.mu.Unlock()
	var claims, devices int
	if src != nil {
		claims, devices = src()
	}
	ch <- prometheus.MustNewConstMetric(c.claims, prometheus.GaugeValue, float64(claims))
	ch <- prometheus.MustNewConstMetric(c.devices, prometheus.GaugeValue, float64(devices))
}
