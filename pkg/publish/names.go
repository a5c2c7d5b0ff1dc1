package publish

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

// GPUNames maps each GPU's UUID to its device name (gpu-<n>, n its position
// in PCI bus ID order): the one naming rule, for tools that name GPUs the
// way the published slices do.
func GPUNames(n *inventory.Node) (map[string]string, error) {
	order, err := busOrder(n)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(order))
	for pos, gi := range order {
		out[n.GPUs[gi].UUID] = GPUName(pos)
	}
	return out, nil
}
