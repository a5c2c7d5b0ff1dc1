package cdi

// CDI annotation keys recording what a spec belongs to. CDI validates
// annotation keys as Kubernetes qualified names (DNS prefix, name part of at
// most 63 characters); these are fixed strings that satisfy that, checked by
// a test. Values are free-form.
const (
	annotationPrefix = "gpu.tessera.dev/"

	// On the spec: the claim.
	annClaimUID       = annotationPrefix + "claim-uid"
	annClaimNamespace = annotationPrefix + "claim-namespace"
	annClaimName      = annotationPrefix + "claim-name"

	// On every CDI device: the vendor it serves.
	annVendor = annotationPrefix + "vendor"

	// On each allocated device (absent on common devices): its checkpoint
	// record (record.go), the allocation result entry and the IDs
	// WriteClaimSpec returned for it.
	annRequest       = annotationPrefix + "request"
	annPool          = annotationPrefix + "pool"
	annDevice        = annotationPrefix + "device"
	annGPUUUID       = annotationPrefix + "gpu-uuid"
	annPartitionUUID = annotationPrefix + "partition-uuid"
	annCDIDeviceIDs  = annotationPrefix + "cdi-device-ids" // comma-separated
	annShareID       = annotationPrefix + "share-id"       // a multi-allocatable device's share
	// annSharing is the device's sharing settings as the checkpoint's JSON
	// (absent: none), so a checkpoint rebuilt from specs still knows what
	// to undo.
	annSharing = annotationPrefix + "sharing"
	// annNCCLTopoFile is "true" on a device of a claim that asked for an
	// NCCL topology file (absent: it did not), so that a checkpoint
	// rebuilt from specs writes the file again with a rewritten spec.
	annNCCLTopoFile = annotationPrefix + "nccl-topo-file"
	// annVFIO is a passed GPU's record as the checkpoint's JSON (absent:
	// not passed), so a checkpoint rebuilt from specs still gives it back
	// to its driver.
	annVFIO = annotationPrefix + "vfio"
	// annAdminAccess is "true" on a device allocated for admin access
	// (absent: it was not), so a checkpoint rebuilt from specs still
	// counts a monitor's device as holding nothing.
	annAdminAccess = annotationPrefix + "admin-access"
)
