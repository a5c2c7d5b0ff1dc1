package inspect

import (
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/pkg/publish"
)

const memorySlicePrefix = "memory-slice-"

// BuildInventory builds the inventory of the given nodes (every node when
// none is given) from a snapshot.
func BuildInventory(s *Snapshot, only []string) (*Inventory, error) {
	allocs := AllocationsOf(s.Claims)
	inv := &Inventory{Nodes: []Node{}}
	found := map[string]bool{}
	for _, nd := range NodesOf(s) {
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
		return nil, fmt.Errorf("no ResourceSlices of driver %s for node %s in %s", DriverName, strings.Join(missing, ", "), s.Source)
	}
	var all []GPU
	for _, n := range inv.Nodes {
		all = append(all, n.GPUs...)
	}
	inv.Fleet = summarize(all)
	inv.Fleet.Nodes = len(inv.Nodes)
	return inv, nil
}

func buildGPU(nd *NodeDevices, g *GPUGroup, allocs Allocations) GPU {
	out := GPU{Node: nd.Name, Device: g.Name, Published: g.Whole != nil, Partitioning: PartitioningNone}
	// Attributes common to the GPU come from the whole device, or else
	// from a partition (they carry the parent's vendor, model, ...).
	src := g.Whole
	if src == nil && len(g.Partitions) > 0 {
		src = g.Partitions[0].Dev
	}
	if src != nil {
		out.Vendor = AttrString(src, publish.AttrVendor)
		out.Model = AttrString(src, publish.AttrModel)
		out.ProductName = AttrString(src, publish.AttrProductName)
		out.Simulated = IsSimulated(src)
		out.PCIeRoot = AttrString(src, AttrPCIeRoot)
		if v, ok := AttrInt(src, AttrNUMANode); ok {
			out.NUMANode = &v
		}
	}
	if g.Whole != nil {
		w := g.Whole
		out.UUID = AttrString(w, publish.AttrUUID)
		out.MemoryBytes = CapacityBytes(w)
		out.Fabric = AttrString(w, publish.AttrFabric)
		out.FabricIsland = AttrString(w, publish.AttrFabricIsland)
		out.FabricBandwidthGBps, _ = AttrInt(w, publish.AttrFabricBandwidth)
		out.PCIBusID = AttrString(w, AttrPCIBusID)
		out.Shared = IsShared(w)
		out.Holders = allocs[DeviceKey{g.Pool, w.Name}]
		out.Taints = TaintsOf(w)
		if out.Shared {
			out.SharedMemory = sharedUsage(w, out.Holders)
		}
	} else if src != nil {
		out.UUID = AttrString(src, publish.AttrParentUUID)
	}

	cs, dynamic := nd.CounterSets[DeviceKey{g.Pool, g.Name}]
	switch {
	case dynamic:
		out.Partitioning = PartitioningDynamic
		out.MemorySlices = &Usage{Total: int64(countMemorySlices(cs))}
	case len(g.Partitions) > 0:
		out.Partitioning = PartitioningStatic
	}
	used := map[string]bool{}
	if dynamic && len(out.Holders) > 0 {
		markSlices(used, g.Whole, g.Name)
	}
	for _, p := range g.Partitions {
		out.Taints = MergeTaints(out.Taints, TaintsOf(p.Dev))
		if out.PartitionKind == "" {
			out.PartitionKind = AttrString(p.Dev, publish.AttrPartitionKind)
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

func buildPartition(d *resourceapi.Device, parent string, holders []Holder) Partition {
	p := Partition{
		Device:      d.Name,
		Kind:        AttrString(d, publish.AttrPartitionKind),
		Profile:     AttrString(d, publish.AttrProfile),
		UUID:        AttrString(d, publish.AttrUUID),
		MemoryBytes: CapacityBytes(d),
		Taints:      TaintsOf(d),
		Shared:      IsShared(d),
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
	slices.SortFunc(p.MemorySlices, CompareDeviceNames)
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
func sharedUsage(d *resourceapi.Device, holders []Holder) *Usage {
	u := &Usage{Total: CapacityBytes(d)}
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
