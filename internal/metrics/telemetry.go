package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tessera-gpu/tessera/internal/telemetry"
)

// DeviceTelemetry is one device's readings with its labels: the device's
// published name and UUID and, where exactly one pod holds it, that pod.
type DeviceTelemetry struct {
	Node, Device, UUID string
	// Namespace and Pod name the device's one holder; empty when nobody
	// or more than one pod holds it (a share of a GPU is not the GPU's
	// numbers).
	Namespace, Pod string
	Sample         telemetry.Sample
	// PassedThrough: the device is a GPU passed through to a virtual
	// machine, which nothing on the host can read; Sample is empty.
	PassedThrough bool
}

// TelemetryFunc returns the latest poll's readings, joined with the
// published devices and their holders.
type TelemetryFunc func() []DeviceTelemetry

var telemetryLabels = []string{"node", "device", "uuid", "namespace", "pod"}

// telemetryGauge is one series per device of one field, in base units:
// the field's value times mul, divided by div (a percent is divided by
// 100, so 70 % is exactly 0.7).
type telemetryGauge struct {
	field    telemetry.Field
	mul, div float64
	desc     *prometheus.Desc
}

// telemetryCollector exports the poller's snapshot at scrape time: a
// scrape reads memory, never the hardware.
type telemetryCollector struct {
	gauges []telemetryGauge
	passed *prometheus.Desc

	mu  sync.Mutex
	src TelemetryFunc
}

func newTelemetryCollector() *telemetryCollector {
	g := func(f telemetry.Field, mul, div float64, name, help string) telemetryGauge {
		return telemetryGauge{field: f, mul: mul, div: div, desc: prometheus.NewDesc(namespace+"_gpu_"+name, help, telemetryLabels, nil)}
	}
	return &telemetryCollector{passed: prometheus.NewDesc(namespace+"_gpu_passed_through", "1 for a GPU passed through to a virtual machine (vfio-pci holds it): its host driver cannot read it, so it has no other tessera_gpu_* series.", telemetryLabels, nil), gauges: []telemetryGauge{
		g(telemetry.MemoryUsedBytes, 1, 1, "memory_used_bytes", "Memory in use on the device (a GPU, a MIG device, an AMD card), from the backend's last telemetry poll."),
		g(telemetry.MemoryTotalBytes, 1, 1, "memory_total_bytes", "Memory of the device, from the backend's last telemetry poll."),
		g(telemetry.UtilizationPercent, 1, 100, "utilization_ratio", "Share of the last sample period the device was busy (0..1), from the backend's last telemetry poll."),
		g(telemetry.TemperatureCelsius, 1, 1, "temperature_celsius", "GPU core temperature, from the backend's last telemetry poll."),
		g(telemetry.PowerWatts, 1, 1, "power_watts", "Power draw of the GPU, from the backend's last telemetry poll."),
		g(telemetry.PowerLimitWatts, 1, 1, "power_limit_watts", "Power limit enforced on the GPU, from the backend's last telemetry poll."),
		g(telemetry.SMClockMHz, 1e6, 1, "sm_clock_hertz", "Graphics (NVIDIA SM, AMD shader) clock of the GPU, from the backend's last telemetry poll."),
	}}
}

func (c *telemetryCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, g := range c.gauges {
		ch <- g.desc
	}
	ch <- c.passed
}

func (c *telemetryCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	src := c.src
	c.mu.Unlock()
	if src == nil {
		return
	}
	devs := src()
	// One device reported twice would fail the whole scrape: the first
	// is kept.
	seen := make(map[[2]string]bool, len(devs))
	for _, d := range devs {
		k := [2]string{d.Device, d.UUID}
		if seen[k] {
			continue
		}
		seen[k] = true
		if d.PassedThrough {
			ch <- prometheus.MustNewConstMetric(c.passed, prometheus.GaugeValue, 1, d.Node, d.Device, d.UUID, d.Namespace, d.Pod)
		}
		for _, g := range c.gauges {
			v, ok := d.Sample.Get(g.field)
			if !ok {
				continue // unknown: no series rather than a made-up 0
			}
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, v*g.mul/g.div, d.Node, d.Device, d.UUID, d.Namespace, d.Pod)
		}
	}
}

// SetTelemetrySource sets where the tessera_gpu_* telemetry gauges are
// read from.
func (m *Metrics) SetTelemetrySource(f TelemetryFunc) {
	if m == nil {
		return
	}
	m.telemetry.mu.Lock()
	m.telemetry.src = f
	m.telemetry.mu.Unlock()
}

// TelemetryPollFailed counts one failed telemetry poll of the backend.
func (m *Metrics) TelemetryPollFailed() {
	if m == nil {
		return
	}
	m.telemetryFailures.Inc()
}
