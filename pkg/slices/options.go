package slices

import (
	"fmt"

	"github.com/tessera-gpu/tessera/pkg/inventory"
)

// Partitioning is how a node publishes partitionable GPUs.
type Partitioning string

const (
	// Static publishes the partitions that exist (cut by an operator) and
	// whole GPUs whose partition mode is off: what the node is now.
	Static Partitioning = "static"
	// Dynamic publishes every placement of every MIG profile with shared
	// counters (KEP-4815) next to the whole GPU, so the scheduler picks a
	// placement and the driver carves it at prepare.
	Dynamic Partitioning = "dynamic"
)

// ParsePartitioning parses the --partitioning flag value.
func ParsePartitioning(s string) (Partitioning, error) {
	switch p := Partitioning(s); p {
	case Static, Dynamic:
		return p, nil
	case "":
		return Static, nil
	}
	return "", fmt.Errorf("partitioning %q is not static or dynamic", s)
}

// Options tune Build.
type Options struct {
	Partitioning Partitioning
}

// Carve is what prepare must cut for a dynamically published partition.
type Carve struct {
	Profile   string
	Placement inventory.Placement
}

// GPUMode says how a GPU was published, for the agent's log.
type GPUMode struct {
	Device string // gpu-<n>
	UUID   string
	// Mode is "whole", "partitions", "whole+partitions" (static) or
	// "dynamic"; Reason says why a MIG-capable GPU is not dynamic.
	Mode, Reason string
}
