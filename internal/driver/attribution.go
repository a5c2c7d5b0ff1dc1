package driver

import (
	"strconv"

	"github.com/tessera-gpu/tessera/internal/claims"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/metrics"
	"github.com/tessera-gpu/tessera/internal/podresources"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// Attribution joins the kubelet's allocations of this driver's devices
// with the last published build (a device's GPU and partition) and the
// checkpoint (what the claim got: the UUID of a partition carved at
// prepare, the share), for tessera_device_allocation_info. A device it
// knows neither way is still exported, with the kubelet's labels only.
func (d *Driver) Attribution(allocs []podresources.Allocation) []metrics.DeviceAllocation {
	if len(allocs) == 0 {
		return nil
	}
	pub := d.Published()
	held := d.claims.HeldDevices()
	out := make([]metrics.DeviceAllocation, 0, len(allocs))
	for _, a := range allocs {
		m := metrics.DeviceAllocation{
			Node: d.opts.NodeName, Device: a.Device,
			ClaimNamespace: a.ClaimNamespace, Claim: a.Claim,
			Namespace: a.Namespace, Pod: a.Pod, Container: a.Container,
			ShareID: a.ShareID,
		}
		var gpu *inventory.GPU
		if pub != nil && (a.Pool == "" || a.Pool == pub.Pool) {
			if e, ok := pub.Devices[a.Device]; ok {
				gpu = e.GPU
				fromEntry(&m, e)
			}
		}
		if h, ok := heldDevice(held[claims.ClaimRef{Namespace: a.ClaimNamespace, Name: a.Claim}], a); ok {
			fromHeld(&m, h, gpu)
		}
		out = append(out, m)
	}
	return out
}

// fromEntry fills what the published device says.
func fromEntry(m *metrics.DeviceAllocation, e publish.Entry) {
	if e.GPU != nil {
		m.UUID = e.GPU.UUID
	}
	switch {
	case e.Partition != nil:
		setPartition(m, e.GPU, e.Partition)
	case e.Carve != nil:
		m.Profile = e.Carve.Profile
	}
}

// fromHeld fills what the checkpoint says the claim holds: for a
// partition carved at prepare, the only record of its UUID.
func fromHeld(m *metrics.DeviceAllocation, h claims.HeldDevice, gpu *inventory.GPU) {
	if m.ShareID == "" {
		m.ShareID = h.ShareID
	}
	if h.PartitionUUID == "" {
		if m.UUID == "" {
			m.UUID = h.GPUUUID
		}
		return
	}
	if m.ParentUUID != "" && m.UUID == h.PartitionUUID {
		return // the published partition, already filled
	}
	m.UUID, m.ParentUUID = h.PartitionUUID, h.GPUUUID
	if m.Profile == "" {
		m.Profile = h.Profile
	}
	if gpu != nil {
		for i := range gpu.Partitions {
			if p := &gpu.Partitions[i]; p.UUID == h.PartitionUUID {
				setPartition(m, gpu, p)
			}
		}
	}
}

// setPartition labels a partition: its UUID under its GPU's, its profile,
// and its instance on the GPU (MIG: the GPU instance id, dcgm-exporter's
// GPU_I_ID; AMD: the compute partition's index, the device metrics
// exporter's gpu_partition_id).
func setPartition(m *metrics.DeviceAllocation, gpu *inventory.GPU, p *inventory.Partition) {
	m.UUID, m.Profile = p.UUID, p.Profile
	if gpu != nil {
		m.ParentUUID = gpu.UUID
	}
	m.GPUInstance = strconv.Itoa(p.GPUInstanceID)
}

// heldDevice finds the kubelet's device among the claim's prepared
// devices: by name, and by share where one device holds several.
func heldDevice(devs []claims.HeldDevice, a podresources.Allocation) (claims.HeldDevice, bool) {
	var found claims.HeldDevice
	n := 0
	for _, h := range devs {
		if h.Device != a.Device {
			continue
		}
		if a.ShareID != "" && h.ShareID == a.ShareID {
			return h, true
		}
		found = h
		n++
	}
	return found, n > 0
}
