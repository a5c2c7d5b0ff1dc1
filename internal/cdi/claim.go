package cdi

import (
	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/sharing"
)

// ClaimDevice is one allocated device of a claim, as the claims package
// resolves it.
type ClaimDevice struct {
	Request      string // request name from the allocation result
	Pool, Device string // pool and device name
	// GPU is the whole GPU (the parent, for a partition).
	GPU inventory.GPU
	// Partition is nil for a whole GPU.
	Partition *inventory.Partition
	// Sharing is how the device is shared (nil: not configured); recorded
	// in the spec.
	Sharing *sharing.Settings
	// MPSPipeDir is the host directory of the claim's MPS daemon's pipes,
	// set for a device under MPS by the claims package's MPS effect, whose
	// claim-level device mounts it; this package does not read it.
	MPSPipeDir string
	// ShareID is the allocation's ShareID on a multi-allocatable device.
	ShareID string
	// NCCLTopoFile: the claim's config asked for an NCCL topology file
	// (set on every device of such a claim, sharing.ResolveTopology); the
	// spec mounts it (claimfile.go).
	NCCLTopoFile bool
	// VFIO is set on a whole GPU passed through to a virtual machine (the
	// claims package's VFIO effect), and recorded in the spec: its host
	// driver no longer holds it, so its CDI device gets none of its
	// vendor's nodes and it joins no vendor's common device; the effect's
	// edits give it the group's node.
	VFIO *checkpoint.VFIO
	// AdminAccess is set on a device allocated for DRA admin access (a
	// monitor), and recorded in the spec: its CDI device is a holder's
	// (the vendor's nodes), and a checkpoint rebuilt from the spec still
	// counts it as holding nothing.
	AdminAccess bool
	// Edits are what the device's owners add to its own CDI device, after
	// its vendor's nodes (edits.go): a memory limit's hooks, a passed
	// GPU's group node.
	Edits Edits
}

// UUID is the partition's UUID for a partition, the GPU's otherwise.
func (d *ClaimDevice) UUID() string {
	if d.Partition != nil {
		return d.Partition.UUID
	}
	return d.GPU.UUID
}

// Name is pool/device, how errors name the device.
func (d *ClaimDevice) Name() string { return d.Pool + "/" + d.Device }

// ClaimRef names a ResourceClaim.
type ClaimRef struct{ UID, Namespace, Name string }

// String is namespace/name (uid), for errors and logs.
func (c ClaimRef) String() string {
	return c.Namespace + "/" + c.Name + " (" + c.UID + ")"
}
