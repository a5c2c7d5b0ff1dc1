package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// SharedDevice is one multi-allocatable device (--sharing=capacity): what it
// offers its shares and what prepared claims on this node hold of it.
type SharedDevice struct {
	Device                              string
	MemoryBytes, AllocatedMemoryBytes   int64
	ComputeUnits, AllocatedComputeUnits int64
	Shares                              int
	// MemoryIsolation is how its shares are held (the device's
	// memoryIsolation attribute: kernel, process, none).
	MemoryIsolation string
}

// MemoryIsolations are the memory_isolation label values of
// tessera_prepared_shares; each is exported from the start, 0 included.
var MemoryIsolations = []string{"kernel", "process", "none"}

// CapacityFunc lists the node's shared devices in publishing order.
type CapacityFunc func() []SharedDevice

// capacityCollector reads the shared devices' use at scrape time from the
// published devices and the checkpoint, so it is right after a restart.
type capacityCollector struct {
	mem, memUsed, cu, cuUsed, shares, byIsolation *prometheus.Desc

	mu  sync.Mutex
	src CapacityFunc
}

func newCapacityCollector() *capacityCollector {
	l := []string{"device"}
	return &capacityCollector{
		mem:     prometheus.NewDesc(namespace+"_shared_device_memory_bytes", "Memory a multi-allocatable device (--sharing=capacity) offers its shares.", l, nil),
		memUsed: prometheus.NewDesc(namespace+"_shared_device_memory_allocated_bytes", "Memory of a multi-allocatable device held by claims prepared on this node (a claim that asked no capacity holds all of it).", l, nil),
		cu:      prometheus.NewDesc(namespace+"_shared_device_compute_units", "Compute units (SMs, CUs) a multi-allocatable device offers its shares.", l, nil),
		cuUsed:  prometheus.NewDesc(namespace+"_shared_device_compute_units_allocated", "Compute units of a multi-allocatable device held by capacity shares prepared on this node.", l, nil),
		shares:  prometheus.NewDesc(namespace+"_shared_device_shares", "Claims prepared on this node holding a share of a multi-allocatable device.", l, nil),
		byIsolation: prometheus.NewDesc(namespace+"_prepared_shares", "Capacity shares prepared on this node by how their memory limit is held: kernel (a cgroup limit), process (MPS client limits the workload applies itself), none (scheduling only).",
			[]string{"memory_isolation"}, nil),
	}
}

func (c *capacityCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.mem, c.memUsed, c.cu, c.cuUsed, c.shares, c.byIsolation} {
		ch <- d
	}
}

func (c *capacityCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	src := c.src
	c.mu.Unlock()
	var devs []SharedDevice
	if src != nil {
		devs = src()
	}
	by := map[string]int{}
	for _, d := range devs {
		by[d.MemoryIsolation] += d.Shares
	}
	for _, level := range MemoryIsolations {
		ch <- prometheus.MustNewConstMetric(c.byIsolation, prometheus.GaugeValue, float64(by[level]), level)
	}
	for _, d := range devs {
		ch <- prometheus.MustNewConstMetric(c.mem, prometheus.GaugeValue, float64(d.MemoryBytes), d.Device)
		ch <- prometheus.MustNewConstMetric(c.memUsed, prometheus.GaugeValue, float64(d.AllocatedMemoryBytes), d.Device)
		ch <- prometheus.MustNewConstMetric(c.cu, prometheus.GaugeValue, float64(d.ComputeUnits), d.Device)
		ch <- prometheus.MustNewConstMetric(c.cuUsed, prometheus.GaugeValue, float64(d.AllocatedComputeUnits), d.Device)
		ch <- prometheus.MustNewConstMetric(c.shares, prometheus.GaugeValue, float64(d.Shares), d.Device)
	}
}

// SetCapacitySource sets where the shared-device gauges are read from.
func (m *Metrics) SetCapacitySource(f CapacityFunc) {
	if m == nil {
		return
	}
	m.capacity.mu.Lock()
	m.capacity.src = f
	m.capacity.mu.Unlock()
}
