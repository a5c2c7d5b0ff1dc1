package publish

import (
	"fmt"
	"sort"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/tessera-gpu/tessera/pkg/inventory"
	"github.com/tessera-gpu/tessera/pkg/pci"
	"github.com/tessera-gpu/tessera/pkg/topology"
)

// API limits of resource.k8s.io/v1 (docs/design.md).
const (
	// MaxDevicesPerSlice is 64, not the API's 128 for plain devices: a slice
	// with taints (device health) or list attributes is limited to 64, and
	// staying under that keeps a slice valid when a taint appears.
	MaxDevicesPerSlice = 64
	// MaxTaintsPerDevice is the API's limit of taints on one device.
	MaxTaintsPerDevice  = 16
	MaxAttrsAndCapacity = 32
)

// Entry maps a published device back to the inventory.
type Entry struct {
	Name      string
	GPU       *inventory.GPU
	Partition *inventory.Partition // nil for a whole GPU and an uncarved placement
	// Carve is set for a dynamically published partition: the profile and
	// placement prepare cuts. Partition is then the one already cut there,
	// if any.
	Carve *Carve
	// Shared is set for a multi-allocatable device: what its shares may
	// consume in all (the published capacities).
	Shared *SharedCapacity
}

// Result is what Build publishes and how to find a device by name.
type Result struct {
	Pool      string
	Resources resourceslice.DriverResources
	Devices   map[string]Entry
	// Order is the device names in publishing order.
	Order []string
	// Modes says how each partitionable GPU was published, in name order.
	Modes []GPUMode
}

// Build publishes n with static partitioning; see BuildWith.
func Build(nodeName string, n *inventory.Node) (*Result, error) {
	return BuildWith(nodeName, n, Options{Partitioning: Static})
}

// item is a device being placed in publishing order.
type item struct {
	dev   resourceapi.Device
	entry Entry
	// Sort keys (see the package doc): group 0 is whole GPUs, 1 static
	// partitions, 2 dynamic placements.
	group, parent           int
	mem                     int64
	stranded, damage, start int
}

// BuildWith turns a node's inventory into the node's one pool of
// ResourceSlices. The pool is named after the node. Devices of unhealthy
// GPUs are still published (health is reported separately).
//
// With Static partitioning a partition-mode GPU is published as its
// partitions only, since the whole GPU cannot run work while MIG mode is on.
// With Dynamic, see dynamicGPU.
func BuildWith(nodeName string, n *inventory.Node, opts Options) (*Result, error) {
	fabrics, err := topology.Compute(n)
	if err != nil {
		return nil, fmt.Errorf("node %s: topology: %w", nodeName, err)
	}
	order, err := busOrder(n)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", nodeName, err)
	}
	rank := gpuRank(n, order, fabrics)
	res := &Result{Pool: nodeName, Devices: map[string]Entry{}}
	var items []item
	var counterSets []resourceapi.CounterSet
	for pos, gi := range order {
		g := &n.GPUs[gi]
		name := GPUName(pos)
		dyn, mode := dynamicGPU(g, opts.Partitioning)
		if g.Partitioning != nil {
			mode.Device, mode.UUID = name, g.UUID
			res.Modes = append(res.Modes, mode)
		}
		if dyn {
			set, its, withheld, err := dynamicDevices(name, g, fabrics[gi], rank[gi], opts.Held)
			if err != nil {
				return nil, fmt.Errorf("node %s: %w", nodeName, err)
			}
			res.Modes[len(res.Modes)-1].Withheld = withheld
			counterSets = append(counterSets, set)
			items = append(items, its...)
			continue
		}
		if g.Partitioning == nil || !g.Partitioning.Enabled {
			d, err := wholeGPUDevice(name, g, fabrics[gi])
			if err != nil {
				return nil, fmt.Errorf("node %s: device %s (%s): %w", nodeName, name, g.PCIBusID, err)
			}
			it := item{dev: d, entry: Entry{Name: name, GPU: g}, group: 0, parent: rank[gi]}
			if err := opts.share(&it); err != nil {
				return nil, fmt.Errorf("node %s: %w", nodeName, err)
			}
			items = append(items, it)
		}
		for pi := range g.Partitions {
			p := &g.Partitions[pi]
			pname := PartitionName(name, *p)
			d, err := partitionDevice(pname, g, p, fabrics[gi])
			if err != nil {
				return nil, fmt.Errorf("node %s: device %s: %w", nodeName, pname, err)
			}
			it := item{dev: d, entry: Entry{Name: pname, GPU: g, Partition: p}, group: 1, parent: rank[gi], mem: p.MemoryBytes, start: p.Placement.Start}
			if err := opts.share(&it); err != nil {
				return nil, fmt.Errorf("node %s: %w", nodeName, err)
			}
			items = append(items, it)
		}
	}
	sortItems(items)
	if opts.Taints != nil {
		for i := range items {
			if ts := opts.Taints(items[i].entry.GPU.UUID); len(ts) > 0 {
				if len(ts) > MaxTaintsPerDevice {
					return nil, fmt.Errorf("node %s: device %s has %d taints, limit %d", nodeName, items[i].dev.Name, len(ts), MaxTaintsPerDevice)
				}
				items[i].dev.Taints = ts
			}
		}
	}

	var pool resourceslice.Pool
	var cur resourceslice.Slice
	for _, it := range items {
		if n := len(it.dev.Attributes) + len(it.dev.Capacity); n > MaxAttrsAndCapacity {
			return nil, fmt.Errorf("node %s: device %s has %d attributes and capacities, limit %d", nodeName, it.dev.Name, n, MaxAttrsAndCapacity)
		}
		if len(cur.Devices) == MaxDevicesPerSlice {
			pool.Slices = append(pool.Slices, cur)
			cur = resourceslice.Slice{}
		}
		cur.Devices = append(cur.Devices, it.dev)
		res.Devices[it.dev.Name] = it.entry
		res.Order = append(res.Order, it.dev.Name)
	}
	// An empty pool still gets one slice: "no devices" differs from "no driver".
	pool.Slices = append(pool.Slices, cur)
	// Counter sets go in slices of their own (a slice holds devices or
	// counters, never both), after the device slices.
	for len(counterSets) > 0 {
		k := min(len(counterSets), MaxCounterSetsPerSlice)
		pool.Slices = append(pool.Slices, resourceslice.Slice{SharedCounters: counterSets[:k]})
		counterSets = counterSets[k:]
	}
	res.Resources = resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{nodeName: pool}}
	return res, nil
}

// sortItems puts devices in allocation priority order (package doc).
func sortItems(items []item) {
	sort.SliceStable(items, func(a, b int) bool {
		x, y := &items[a], &items[b]
		if x.group != y.group {
			return x.group < y.group
		}
		if x.parent != y.parent {
			if x.group == 2 {
				return x.parent > y.parent // dynamic placements fill from the other end
			}
			return x.parent < y.parent
		}
		if x.mem != y.mem {
			return x.mem < y.mem
		}
		if x.group == 2 && x.entry.Carve.Profile != y.entry.Carve.Profile {
			return x.entry.Carve.Profile < y.entry.Carve.Profile
		}
		if x.stranded != y.stranded {
			return x.stranded < y.stranded
		}
		if x.damage != y.damage {
			return x.damage < y.damage
		}
		if x.group == 2 {
			return x.start > y.start
		}
		return x.start < y.start
	})
}

// busOrder returns GPU indices sorted by PCI bus ID, the basis of device names.
func busOrder(n *inventory.Node) ([]int, error) {
	keys := make([]pci.BusID, len(n.GPUs))
	seen := map[pci.BusID]int{}
	for i, g := range n.GPUs {
		k, err := pci.ParseBusID(g.PCIBusID)
		if err != nil {
			return nil, fmt.Errorf("GPU %d (%s): %w", i, g.UUID, err)
		}
		if j, dup := seen[k]; dup {
			return nil, fmt.Errorf("GPUs %d and %d share PCI bus ID %s", j, i, g.PCIBusID)
		}
		seen[k] = i
		keys[i] = k
	}
	order := make([]int, len(n.GPUs))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return keys[order[a]].Less(keys[order[b]]) })
	return order, nil
}

// gpuRank orders GPUs: smaller first, then NUMA node, island, bus position.
func gpuRank(n *inventory.Node, order []int, fabrics []topology.Fabric) map[int]int {
	pos := map[int]int{}
	for p, gi := range order {
		pos[gi] = p
	}
	// An island sorts where its first member (in bus order) does.
	islandPos := map[string]int{}
	for _, gi := range order {
		if _, ok := islandPos[fabrics[gi].Island]; !ok {
			islandPos[fabrics[gi].Island] = pos[gi]
		}
	}
	ranked := append([]int(nil), order...)
	sort.SliceStable(ranked, func(a, b int) bool {
		ga, gb := &n.GPUs[ranked[a]], &n.GPUs[ranked[b]]
		if ga.MemoryBytes != gb.MemoryBytes {
			return ga.MemoryBytes < gb.MemoryBytes
		}
		if ga.ComputeUnits != gb.ComputeUnits {
			return ga.ComputeUnits < gb.ComputeUnits
		}
		if ga.NUMANode != gb.NUMANode {
			return ga.NUMANode < gb.NUMANode
		}
		ia, ib := islandPos[fabrics[ranked[a]].Island], islandPos[fabrics[ranked[b]].Island]
		if ia != ib {
			return ia < ib
		}
		return pos[ranked[a]] < pos[ranked[b]]
	})
	rank := map[int]int{}
	for r, gi := range ranked {
		rank[gi] = r
	}
	return rank
}
