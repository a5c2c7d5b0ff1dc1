package driver

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/health"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/metrics"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// healthResend is how often a full report is re-sent. The kubelet marks a
// device Unknown after its HealthCheckTimeout (30 s by default) without one.
const healthResend = 10 * time.Second

// healthHub feeds the backend's health signals into the tracker
// (internal/health), republishes the node's slices when a GPU's conditions (its
// taints) change, and wakes the kubelet's health streams.
type healthHub struct {
	devices   func() *publish.Result
	metrics   *metrics.Metrics
	tracker   *health.Tracker
	republish func(context.Context) error
	// extra are devices of other pools whose health the node decides
	// (its prepared IMEX channels); nil for none.
	extra func(now time.Time) []kubeletplugin.DeviceHealth

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on each change
}

func newHealthHub(devices func() *publish.Result, m *metrics.Metrics, tr *health.Tracker) *healthHub {
	return &healthHub{devices: devices, metrics: m, tracker: tr, changed: make(chan struct{})}
}

// run feeds backend events into the tracker until ctx ends, and expires
// conditions whose window passed.
func (h *healthHub) run(ctx context.Context, b backend.Backend) {
	events := make(chan backend.HealthEvent, 64)
	go func() {
		tick := time.NewTicker(expireEvery(h.tracker.Policy().Window))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-events:
				// Signals that arrive together (a watch's first report,
				// a burst of XIDs) are applied together and published
				// once, so no passing state reaches the API server.
				batch := []backend.HealthEvent{ev}
				for more := true; more; {
					select {
					case ev := <-events:
						batch = append(batch, ev)
					default:
						more = false
					}
				}
				changed := false
				for _, ev := range batch {
					changed = h.observe(ctx, ev) || changed
				}
				if changed {
					h.changedNow(ctx)
				}
				// Counted once handled: a scrape that sees the count sees
				// its effect (the republished slices) too.
				for _, ev := range batch {
					h.count(ev)
				}
			case now := <-tick.C:
				if gpus := h.tracker.Expire(now); len(gpus) > 0 {
					klog.FromContext(ctx).Info("Device health conditions cleared after a quiet window", "gpus", gpus)
					h.changedNow(ctx)
				}
			}
		}
	}()
	if err := b.WatchHealth(ctx, events); err != nil && ctx.Err() == nil {
		klog.FromContext(ctx).Error(err, "Health watch ended; devices keep their last reported health")
	}
}

// expireEvery checks for expired conditions often enough that a condition
// clears within a twentieth of its window, but not more than once a second.
func expireEvery(window time.Duration) time.Duration {
	return min(max(window/20, time.Second), 30*time.Second)
}

// observe applies one signal and reports whether its GPU's conditions
// changed.
func (h *healthHub) observe(ctx context.Context, ev backend.HealthEvent) bool {
	gpu := gpuOf(h.devices(), ev.UUID)
	if !h.tracker.Observe(gpu, ev) {
		klog.FromContext(ctx).V(2).Info("Device health signal", "uuid", ev.UUID, "kind", ev.Kind, "code", ev.Code, "count", ev.Count, "message", ev.Message)
		return false
	}
	hl := h.tracker.Health(gpu)
	klog.FromContext(ctx).Info("Device health changed", "gpu", gpu, "signal", ev.Kind, "code", ev.Code, "health", hl.State, "conditions", hl.Reason)
	return true
}

// count counts one handled signal in the metrics.
func (h *healthHub) count(ev backend.HealthEvent) {
	code := ""
	if ev.Kind == backend.HealthXID {
		code = strconv.FormatInt(ev.Code, 10)
	}
	h.metrics.HealthEvent(string(ev.Kind), code)
}

// changedNow republishes the slices (the taints changed) and wakes the
// kubelet's streams.
func (h *healthHub) changedNow(ctx context.Context) {
	if h.republish != nil {
		if err := h.republish(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Republish after a device health change")
		}
	}
	h.setMetrics()
	h.mu.Lock()
	close(h.changed)
	h.changed = make(chan struct{})
	h.mu.Unlock()
}

// setMetrics sets the health gauges from the tracker.
func (h *healthHub) setMetrics() {
	res := h.devices()
	taints := map[metrics.TaintKey]int{}
	unhealthy := 0
	for _, name := range res.Order {
		e := res.Devices[name]
		if e.Partition != nil || e.Carve != nil {
			continue // count GPUs once
		}
		for _, c := range h.tracker.Conditions(e.GPU.UUID) {
			taints[metrics.TaintKey{Key: c.Key, Effect: string(c.Effect)}]++
		}
		if h.tracker.Health(e.GPU.UUID).State == inventory.Unhealthy {
			unhealthy++
		}
	}
	h.metrics.SetHealth(taints, unhealthy)
}

// gpuOf maps a signal's UUID to its GPU's: a partition's signal is its
// GPU's. An unknown UUID is kept (a GPU not published, still tracked).
func gpuOf(res *publish.Result, uuid string) string {
	if res == nil {
		return uuid
	}
	for _, e := range res.Devices {
		if e.Partition != nil && e.Partition.UUID == uuid {
			return e.GPU.UUID
		}
	}
	return uuid
}

// report builds a report covering every published device: each device has
// its GPU's health.
func (h *healthHub) report() (kubeletplugin.DeviceHealthReport, <-chan struct{}) {
	res := h.devices()
	now := time.Now()
	var rep kubeletplugin.DeviceHealthReport
	for _, name := range res.Order {
		hl := h.tracker.Health(res.Devices[name].GPU.UUID)
		rep.Devices = append(rep.Devices, kubeletplugin.DeviceHealth{
			PoolName:    res.Pool,
			DeviceName:  name,
			Health:      toStatus(hl.State),
			LastUpdated: now,
			Message:     hl.Reason,
		})
	}
	// A passed GPU publishes no device, but its claim holds it and its
	// pod's status shows its health: unknown, and why.
	for _, name := range slices.Sorted(maps.Keys(res.Passed)) {
		rep.Devices = append(rep.Devices, kubeletplugin.DeviceHealth{
			PoolName: res.Pool, DeviceName: name, Health: kubeletplugin.HealthStatusUnknown, LastUpdated: now, Message: PassedThroughMessage,
		})
	}
	if h.extra != nil {
		rep.Devices = append(rep.Devices, h.extra(now)...)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return rep, h.changed
}

func toStatus(s inventory.HealthState) kubeletplugin.HealthStatus {
	switch s {
	case inventory.Healthy, "":
		return kubeletplugin.HealthStatusHealthy
	case inventory.Unhealthy:
		return kubeletplugin.HealthStatusUnhealthy
	default:
		return kubeletplugin.HealthStatusUnknown
	}
}

// WatchHealthStatus streams device health to the kubelet: a full report at
// once, again on every change, and at least every healthResend.
func (d *Driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	t := time.NewTicker(healthResend)
	defer t.Stop()
	for {
		rep, changed := d.health.report()
		select {
		case <-ctx.Done():
			return nil
		case reports <- rep:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-t.C:
		}
	}
}
