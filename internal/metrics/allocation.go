package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// DeviceAllocation is one tessera_device_allocation_info series: a device
// of this node, the claim that holds it and the container that uses it.
type DeviceAllocation struct {
	Node, Device string
	// UUID is the device's own: the GPU's for a whole GPU, the
	// partition's for a partition; ParentUUID is the GPU's for a partition.
	UUID, ParentUUID string
	// GPUInstance is a MIG partition's GPU instance id; Profile is a
	// partition's profile.
	GPUInstance, Profile      string
	ClaimNamespace, Claim     string
	Namespace, Pod, Container string
	ShareID                   string
}

// AllocationFunc lists the allocations of the last PodResources poll,
// joined with what the agent knows of each device.
type AllocationFunc func() []DeviceAllocation

var allocationLabels = []string{"node", "device", "uuid", "parent_uuid", "gpu_instance", "profile",
	"claim_namespace", "claim", "namespace", "pod", "container", "share_id"}

// allocationCollector exports the last poll's set at scrape time: a
// scrape never waits on the kubelet.
type allocationCollector struct {
	info *prometheus.Desc

	mu  sync.Mutex
	src AllocationFunc
}

func newAllocationCollector() *allocationCollector {
	return &allocationCollector{
		info: prometheus.NewDesc(namespace+"_device_allocation_info",
			"A device of this node held by a claim and used by a container of a running pod, from the kubelet's PodResources API (1 per device, claim and container); uuid, parent_uuid and gpu_instance join with GPU exporters' labels (docs/metrics.md).",
			allocationLabels, nil),
	}
}

func (c *allocationCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.info }

func (c *allocationCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	src := c.src
	c.mu.Unlock()
	if src == nil {
		return
	}
	// The kubelet names a device once per container, and a container
	// once; a repeat (the same claim twice in one container) would fail
	// the whole scrape, so it is exported once.
	seen := map[DeviceAllocation]bool{}
	for _, a := range src() {
		if seen[a] {
			continue
		}
		seen[a] = true
		ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1,
			a.Node, a.Device, a.UUID, a.ParentUUID, a.GPUInstance, a.Profile,
			a.ClaimNamespace, a.Claim, a.Namespace, a.Pod, a.Container, a.ShareID)
	}
}

// SetAllocationSource sets where tessera_device_allocation_info is read
// from.
func (m *Metrics) SetAllocationSource(f AllocationFunc) {
	if m == nil {
		return
	}
	m.allocation.mu.Lock()
	m.allocation.src = f
	m.allocation.mu.Unlock()
}

// PodResourcesFailed counts one failed poll of the kubelet's PodResources
// API.
func (m *Metrics) PodResourcesFailed() {
	if m == nil {
		return
	}
	m.podResourcesErrors.Inc()
}
