package slices

import (
	"fmt"
	"strings"

	"github.com/tessera-gpu/tessera/pkg/inventory"
)

// GPUName is the device name of the GPU at position n in PCI bus ID order.
func GPUName(n int) string { return fmt.Sprintf("gpu-%d", n) }

// PartitionName is the device name of partition p of the GPU named parent.
func PartitionName(parent string, p inventory.Partition) string {
	profile := strings.NewReplacer(".", "-", "+", "-", "_", "-").Replace(strings.ToLower(p.Profile))
	return fmt.Sprintf("%s-%s-%s-%d", parent, p.Kind, profile, p.Placement.Start)
}
