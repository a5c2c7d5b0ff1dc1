package driver

import (
	"maps"
	"slices"

	"github.com/tessera-gpu/tessera/internal/metrics"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/podresources"
	"github.com/tessera-gpu/tessera/internal/telemetry"
)

// Telemetry labels the latest telemetry samples for the tessera_gpu_*
// gauges: each sample's UUID becomes the device it belongs to (the
// published device, or for a partition carved at prepare the claim's
// device in the checkpoint, as Attribution finds them), and a device that
// exactly one pod holds (allocs, the last PodResources poll) gets that
// pod. A GPU whose partitions are published, not itself, is named by
// its GPU name (gpu-3). A sample of a device the agent knows neither way
// is left out: it has no name to give it.
//
// A GPU passed through to a virtual machine has no sample (its driver
// cannot read it): it is reported passed through, with its holder, and no
// reading, rather than left out as if it were gone.
func (d *Driver) Telemetry(samples []telemetry.Sample, allocs []podresources.Allocation) []metrics.DeviceTelemetry {
	pub := d.Published()
	if len(samples) == 0 && (pub == nil || len(pub.Passed) == 0) {
		return nil
	}
	device := map[string]string{} // UUID -> device name
	if pub != nil {
		for name, e := range pub.Devices {
			switch {
			case e.Partition != nil:
				device[e.Partition.UUID] = name
			case e.GPU != nil && e.Carve == nil:
				device[e.GPU.UUID] = name
			}
		}
		// Second, so a GPU published whole keeps its own name.
		for name, e := range pub.Devices {
			if e.GPU == nil || device[e.GPU.UUID] != "" {
				continue
			}
			if gpu, ok := names.ParentGPU(name); ok {
				device[e.GPU.UUID] = gpu
			}
		}
	}
	for _, held := range d.claims.HeldDevices() {
		for _, h := range held {
			if h.PartitionUUID != "" && device[h.PartitionUUID] == "" {
				device[h.PartitionUUID] = h.Device
			}
		}
	}
	pool := ""
	if pub != nil {
		pool = pub.Pool
	}
	holders := holdersByDevice(allocs, pool)
	out := make([]metrics.DeviceTelemetry, 0, len(samples))
	for _, s := range samples {
		name := device[s.UUID]
		if name == "" {
			continue
		}
		t := metrics.DeviceTelemetry{Node: d.opts.NodeName, Device: name, UUID: s.UUID, Sample: s}
		if h := holders[name]; len(h) == 1 {
			for p := range h {
				t.Namespace, t.Pod = p[0], p[1]
			}
		}
		out = append(out, t)
	}
	if pub != nil {
		for _, name := range slices.Sorted(maps.Keys(pub.Passed)) {
			t := metrics.DeviceTelemetry{Node: d.opts.NodeName, Device: name, UUID: pub.Passed[name].GPU.UUID, PassedThrough: true}
			if h := holders[name]; len(h) == 1 {
				for p := range h {
					t.Namespace, t.Pod = p[0], p[1]
				}
			}
			out = append(out, t)
		}
	}
	return out
}

// holdersByDevice is the set of pods (namespace, name) using each device
// of this node's pool.
func holdersByDevice(allocs []podresources.Allocation, pool string) map[string]map[[2]string]bool {
	out := map[string]map[[2]string]bool{}
	for _, a := range allocs {
		if a.Pool != "" && pool != "" && a.Pool != pool {
			continue
		}
		if out[a.Device] == nil {
			out[a.Device] = map[[2]string]bool{}
		}
		out[a.Device][[2]string{a.Namespace, a.Pod}] = true
	}
	return out
}
