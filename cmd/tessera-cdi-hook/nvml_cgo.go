//go:build cgo && linux

package main

import (
	"github.com/tessera-gpu/tessera/pkg/memlimit"
	"github.com/tessera-gpu/tessera/pkg/memlimit/nvmllimit"
)

// nvmlSetter is the node's NVIDIA library; it is loaded only when a limit
// of the NVML mechanism is set or released.
func nvmlSetter() memlimit.Setter { return nvmllimit.New() }
