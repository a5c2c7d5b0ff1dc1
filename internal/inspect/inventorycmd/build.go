package inventorycmd

import (
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/inspect"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

const memorySlicePrefix = "memory-slice-"

// Build builds the inventory of the given nodes (every node when
// none is given) from a snapshot.
func Build(s *inspect.Snapshot, only []string) (*Inventory, error) {
	allocs := inspect.AllocationsOf(s.Claims)
	inv := &Inventory{Nodes: []Node{}}
	found := map[string]bool{}
	for _, nd := range inspect.NodesOf(s) {
		if len(only) > 0 && !slices.Contains(only, nd.Name) {
			continue
		}
		found[nd.Name] = true
		n := Node{Name: nd.Name, GPUs: []GPU{}}
		for _, g := range nd.GPUGroups() {
			n.GPUs = append(n.GPUs, buildGPU(nd, g, allocs))
		}
		n.Summary = summarize(n.GPUs)
		inv.Nodes = append(inv.Nodes, n)
	}
	var missing []string
	for _, name := range only {
		if !found[name] {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no ResourceSlices of driver %s for node %s in %s", names.DriverName, strings.Join(missing, ", "), s.Source)
	}
	var all []GPU
	for _, n := range inv.Nodes {
		all = append(all, n.GPUs...)
	}
	inv.Fleet = summarize(all)
	inv.Fleet.Nodes = len(inv.Nodes)
	return inv, nil
}

func buildGPU(nd *inspect.NodeDevices, g *inspect.GPUGroup, allocs inspect.Allocations) GPU {
	out := GPU{Node: nd.Name, Device: g.Name, Published: g.Whole != nil, Partitioning: names.PartitioningNone}
	// Attributes common to the GPU come from the whole device, or else
	// from a partition (they carry the parent's vendor, model, ...).
	src := g.Whole
	if src == nil && len(g.Partitions) > 0 {
		src = g.Partitions[0].Dev
	}
	if src != nil {
		out.Vendor = inspect.AttrString(src, publish.AttrVendor)
		out.Model = inspect.AttrString(src, publish.AttrModel)
		out.ProductName = inspect.AttrString(src, publish.AttrProductName)
		out.Simulated = inspect.IsSimulated(src)
		out.PCIeRoot = inspect.AttrString(src, inspect.AttrPCIeRoot)
		if v, ok := inspect.AttrInt(src, inspect.AttrNUMANode); ok {
			out.NUMANode = &v
		}
	}
	if g.Whole != nil {
		w := g.Whole
		out.UUID = inspect.AttrString(w, publish.AttrUUID)
		out.MemoryBytes = inspect.CapacityBytes(w)
		out.Fabric = inspect.AttrString(w, publish.AttrFabric)
		out.FabricIsland = inspect.AttrString(w, publish.AttrFabricIsland)
		out.FabricBandwidthGBps, _ = inspect.AttrInt(w, publish.AttrFabricBandwidth)
		out.FabricDomain = inspect.AttrString(w, publish.AttrFabricDomain)
		out.PCIBusID = inspect.AttrString(w, inspect.AttrPCIBusID)
		out.Mode = inspect.AttrString(w, publish.AttrPartitionMode)
		out.Shared = inspect.IsShared(w)
		out.Holders = allocs[inspect.DeviceKey{Pool: g.Pool, Name: w.Name}]
		out.Taints = inspect.TaintsOf(w)
		if out.Shared {
			out.SharedMemory = sharedUsage(w, out.Holders)
		}
	} else if src != nil {
		out.UUID = inspect.AttrString(src, publish.AttrParentUUID)
	}

	cs, dynamic := nd.CounterSets[inspect.DeviceKey{Pool: g.Pool, Name: g.Name}]
	switch {
	case dynamic:
		out.Partitioning = names.PartitioningDynamic
		out.MemorySlices = &Usage{Total: int64(countMemorySlices(cs))}
	case len(g.Partitions) > 0:
		out.Partitioning = names.PartitioningStatic
	}
	used := map[string]bool{}
	if dynamic && len(out.Holders) > 0 {
		markSlices(used, g.Whole, g.Name)
	}
	for _, p := range g.Partitions {
		out.Taints = inspect.MergeTaints(out.Taints, inspect.TaintsOf(p.Dev))
		if out.PartitionKind == "" {
			out.PartitionKind = inspect.AttrString(p.Dev, publish.AttrPartitionKind)
		}
		holders := allocs[p.Key()]
		if dynamic {
			if len(holders) == 0 {
				continue // an unallocated placement is only a possibility
			}
			markSlices(used, p.Dev, g.Name)
		}
		out.Partitions = append(out.Partitions, buildPartition(p.Dev, g.Name, holders))
	}
	if dynamic {
		out.MemorySlices.Used = int64(len(used))
	}
	return out
}

func buildPartition(d *resourceapi.Device, parent string, holders []inspect.Holder) Partition {
	p := Partition{
		Device:      d.Name,
		Kind:        inspect.AttrString(d, publish.AttrPartitionKind),
		Profile:     inspect.AttrString(d, publish.AttrProfile),
		UUID:        inspect.AttrString(d, publish.AttrUUID),
		MemoryBytes: inspect.CapacityBytes(d),
		Taints:      inspect.TaintsOf(d),
		Shared:      inspect.IsShared(d),
		Holders:     holders,
	}
	for _, c := range d.ConsumesCounters {
		if c.CounterSet != parent {
			continue
		}
		for name := range c.Counters {
			if strings.HasPrefix(name, memorySlicePrefix) {
				p.MemorySlices = append(p.MemorySlices, name)
			}
		}
	}
	slices.SortFunc(p.MemorySlices, inspect.CompareDeviceNames)
	if p.Shared {
		p.SharedMemory = sharedUsage(d, holders)
	}
	return p
}

// markSlices records the memory slices of set that d consumes.
func markSlices(used map[string]bool, d *resourceapi.Device, set string) {
	if d == nil {
		return
	}
	for _, c := range d.ConsumesCounters {
		if c.CounterSet != set {
			continue
		}
		for name, v := range c.Counters {
			if strings.HasPrefix(name, memorySlicePrefix) && !v.Value.IsZero() {
				used[name] = true
			}
		}
	}
}

func countMemorySlices(cs resourceapi.CounterSet) int {
	n := 0
	for name := range cs.Counters {
		if strings.HasPrefix(name, memorySlicePrefix) {
			n++
		}
	}
	return n
}

// sharedUsage is the memory the shares of a multi-allocatable device consume.
func sharedUsage(d *resourceapi.Device, holders []inspect.Holder) *Usage {
	u := &Usage{Total: inspect.CapacityBytes(d)}
	for _, h := range holders {
		u.Used += h.ConsumedMemoryBytes
	}
	return u
}

func summarize(gpus []GPU) Summary {
	s := Summary{GPUs: len(gpus), Models: []ModelCount{}}
	count := map[string]int{}
	for i := range gpus {
		g := &gpus[i]
		m := g.Model
		if m == "" {
			m = "unknown"
		}
		count[m]++
		if g.InUse() {
			s.InUse++
		} else {
			s.Free++
		}
		if g.Unhealthy() {
			s.Unhealthy++
		}
	}
	for m, c := range count {
		s.Models = append(s.Models, ModelCount{Model: m, Count: c})
	}
	slices.SortFunc(s.Models, func(a, b ModelCount) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Model, b.Model)
	})
	return s
}
