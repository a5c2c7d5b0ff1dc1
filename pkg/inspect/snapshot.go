package inspect

import (
	resourceapi "k8s.io/api/resource/v1"
)

// DriverName is the DRA driver whose devices the views show.
const DriverName = "gpu.tessera.dev"

// Snapshot is what every view is built from: the driver's ResourceSlices and
// the ResourceClaims that may hold their devices. Source says where they came
// from, for error messages.
type Snapshot struct {
	Slices []resourceapi.ResourceSlice
	Claims []resourceapi.ResourceClaim
	Source string
}
