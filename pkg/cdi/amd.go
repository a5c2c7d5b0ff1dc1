package cdi

import (
	"fmt"
	"strconv"

	"github.com/tessera-gpu/tessera/pkg/inventory"
)

var amdRules = vendorRules{
	deviceNodes: amdDeviceNodes,
	// KFD is the one compute interface ROCm opens for all GPUs; access to a
	// GPU is then decided by which render nodes the container has.
	commonNodes: []string{"kfd"},
	// ROCm finds its GPUs from the render nodes present; it needs no
	// variable, and inventing one would only mislead.
	commonEnv: func([]ClaimDevice) ([]string, error) { return nil, nil },
}

// amdDeviceNodes returns the DRM nodes of a GPU or, for a compute
// partition, the partition's own nodes (each XCP is its own DRM device).
func amdDeviceNodes(d ClaimDevice) ([]string, error) {
	minor, render := d.GPU.Minor, d.GPU.RenderMinor
	if p := d.Partition; p != nil {
		if p.Kind != inventory.PartitionXCP {
			return nil, fmt.Errorf("AMD partition %s has kind %q, want %q", p.UUID, p.Kind, inventory.PartitionXCP)
		}
		minor, render = p.Minor, p.RenderMinor
	}
	if err := checkMinor("card minor", minor); err != nil {
		return nil, err
	}
	if err := checkMinor("render minor", render); err != nil {
		return nil, err
	}
	return []string{
		"dri/renderD" + strconv.Itoa(render),
		"dri/card" + strconv.Itoa(minor),
	}, nil
}
