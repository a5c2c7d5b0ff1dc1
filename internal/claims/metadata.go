package claims

import (
	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/cdi"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/isolation"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// Device metadata (KEP-5304, docs/claims.md): what the file the kubelet
// mounts into a claim's containers says of each prepared device. It is
// every attribute the device is published with, so a container reads what
// its claim selected on, and what prepare settled that no slice can say:
// the UUID and instance IDs of a partition carved for the claim (its
// placement had none), a share's limits, the sharing settings the claim's
// config asked, and a passed GPU's IOMMU group. KubeVirt reads a passed
// GPU's PCI address there (resource.kubernetes.io/pciBusID).

// Attribute names metadata adds to the published ones (in the driver's
// domain, so unqualified, as in the slices).
const (
	metaGPUInstance       = "gpuInstance"       // a partition's GPU instance (MIG GI; an AMD partition's index)
	metaComputeInstance   = "computeInstance"   // a partition's compute instance (MIG CI)
	metaShareMemory       = "shareMemory"       // bytes of the device a capacity share holds
	metaShareComputeUnits = "shareComputeUnits" // compute units a capacity share holds
	metaShareEnforced     = "shareEnforced"     // the share's limits are enforced (MPS), not accounting only
	metaTimeSlice         = "timeSlice"         // the time-slice interval the claim's config set
	metaMPSThreads        = "mpsActiveThreadPercentage"
	metaMPSPinned         = "mpsPinnedMemoryLimit" // bytes
	metaPassthrough       = "passthrough"          // the GPU is passed through to a virtual machine
	metaAdminAccess       = "adminAccess"          // the claim watches the device (admin access) and holds nothing of it
)

// metadataOf is device d's metadata: attrs, its attributes as published
// (read only), with what prepare settled over them; iso is how a share is
// held, as its spec was written (nil: not assessed).
func metadataOf(attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, d *cdi.ClaimDevice, iso *isolation.Assessment) map[string]resourceapi.DeviceAttribute {
	out := make(map[string]resourceapi.DeviceAttribute, len(attrs)+4)
	for k, v := range attrs {
		out[string(k)] = v
	}
	str := func(k, v string) {
		if v != "" {
			out[k] = resourceapi.DeviceAttribute{StringValue: &v}
		}
	}
	num := func(k string, v int64) { out[k] = resourceapi.DeviceAttribute{IntValue: &v} }
	flag := func(k string, v bool) { out[k] = resourceapi.DeviceAttribute{BoolValue: &v} }
	if p := d.Partition; p != nil {
		str(publish.AttrUUID, p.UUID)
		num(metaGPUInstance, int64(p.GPUInstanceID))
		num(metaComputeInstance, int64(p.ComputeInstanceID))
	}
	if s := d.Sharing; s != nil {
		str(metaTimeSlice, string(s.TimeSlice))
		if s.MPSActiveThreadPercentage > 0 {
			num(metaMPSThreads, int64(s.MPSActiveThreadPercentage))
		}
		if s.MPSPinnedMemoryLimit > 0 {
			num(metaMPSPinned, s.MPSPinnedMemoryLimit)
		}
		if sh := s.Share; sh != nil {
			num(metaShareMemory, sh.MemoryBytes)
			if sh.ComputeUnits > 0 {
				num(metaShareComputeUnits, sh.ComputeUnits)
			}
			flag(metaShareEnforced, sh.Enforced)
		}
	}
	if iso != nil && iso.Level != "" {
		str(publish.AttrMemoryIsolation, string(iso.Level))
	}
	if d.AdminAccess {
		flag(metaAdminAccess, true)
	}
	if v := d.VFIO; v != nil {
		flag(metaPassthrough, true)
		num(publish.AttrIOMMUGroup, int64(v.Group))
	}
	return out
}

// recordedMetadata is the metadata of a prepared claim's devices, resolved
// against what the node publishes now (passed GPUs among them), for a
// prepare answered from the checkpoint: the kubelet's helper writes the
// file again from it. A device it cannot resolve gets what the
// checkpoint knows alone.
func (m *Manager) recordedMetadata(c *checkpoint.Claim, out []Device) {
	pub := m.cfg.Devices()
	devs, err := m.resolveRecorded(c)
	for i := range out {
		var attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
		if e, ok := pub.Devices[c.Devices[i].Device]; ok {
			attrs = e.Attributes
		} else if e, ok := pub.Passed[c.Devices[i].Device]; ok {
			attrs = e.Attributes
		}
		d := cdi.ClaimDevice{Device: c.Devices[i].Device, Sharing: c.Devices[i].Sharing, VFIO: c.Devices[i].VFIO, AdminAccess: c.Devices[i].AdminAccess}
		if err == nil {
			d = devs[i]
		}
		out[i].Metadata = metadataOf(attrs, &d, out[i].Isolation)
	}
}
