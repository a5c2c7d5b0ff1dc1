package publish

import (
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/names"
)

// PartitionName is the device name (internal/names) of partition p of the GPU
// named parent.
func PartitionName(parent string, p inventory.Partition) string {
	return names.Partition(parent, string(p.Kind), p.Profile, p.Placement.Start)
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
		out[n.GPUs[gi].UUID] = names.GPU(pos)
	}
	return out, nil
}
