// Package v1alpha1 is the gpu.tessera.dev/v1alpha1 API group of opaque device
// configuration that claims and classes pass to the driver
// (spec.devices.config[].opaque with driver gpu.tessera.dev).
//
// No configuration kinds are defined yet (sharing settings come with a later
// change). Until then the driver rejects any opaque configuration addressed
// to it, failing only that claim, rather than ignoring settings a user asked for.
package v1alpha1

// Group and Version of this API.
const (
	Group   = "gpu.tessera.dev"
	Version = "v1alpha1"
)
