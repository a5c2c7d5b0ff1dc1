package inspect

import (
	resourceapi "k8s.io/api/resource/v1"
)

// Snapshot is what every view is built from: the driver's ResourceSlices and
// the ResourceClaims that may hold their devices. Source says where they came
// from, for error messages.
type Snapshot struct {
	Slices []resourceapi.ResourceSlice
	Claims []resourceapi.ResourceClaim
	Source string
}
