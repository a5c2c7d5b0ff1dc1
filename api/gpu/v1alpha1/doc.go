// Package v1alpha1 is the gpu.tessera.dev/v1alpha1 API group of opaque device
// configuration that claims and classes pass to the driver
// (spec.devices.config[].opaque with driver gpu.tessera.dev).
//
// Two kinds exist: GpuConfig for whole GPUs and PartitionConfig for
// partitions (NVIDIA MIG, AMD compute partitions). Both carry sharing
// settings: time-slicing or MPS. Decode is the one decoder, used by the node
// agent at prepare and by the admission webhook at create, so a claim is
// judged the same way in both places: strictly (unknown and duplicate
// fields are errors) and with every error naming its field path.
package v1alpha1

// Group and Version of this API.
const (
	Group   = "gpu.tessera.dev"
	Version = "v1alpha1"
	// APIVersion is what the apiVersion field of every kind must say.
	APIVersion = Group + "/" + Version
)
