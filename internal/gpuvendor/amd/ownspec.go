package amd

import "github.com/tessera-gpu/tessera/internal/gpuvendor"

// OwnSpec is nil: ROCm ships no node-wide CDI spec of its own (the
// container reaches the user-space libraries from its image).
func (Vendor) OwnSpec() gpuvendor.OwnSpec { return nil }
