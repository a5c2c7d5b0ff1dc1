//go:build !cgo || !linux

package main

import "github.com/tessera-gpu/tessera/pkg/memlimit"

// nvmlSetter is nil without cgo: go-nvml cannot load the library, so the
// NVML mechanism fails the container with "built without NVML" rather than
// running it without its limit.
func nvmlSetter() memlimit.Setter { return nil }
