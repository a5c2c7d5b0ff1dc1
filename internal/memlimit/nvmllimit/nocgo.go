//go:build !cgo || !linux

package nvmllimit

import "github.com/tessera-gpu/tessera/internal/memlimit"

// New is nil in a build without cgo: go-nvml cannot load the library, so
// the NVML mechanism fails ("built without NVML") rather than running a
// container without its limit.
func New() memlimit.Setter { return nil }
