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
	allocs := allocationsOf(s.Claims)
	inv := &Inventory{Nodes: []Node{}}
	found := map[string]bool{}
	for _, nd := range nodesOf(s) {
		if len(only) > 0 && !slices.Contains(only, nd.name) {
			continue
		}
		found[nd.name] = true
		n := Node{Name: nd.name, GPUs: []GPU{}}
		for _, g := range nd.gpuGroups() {
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

func buildGPU(nd *nodeDevices, g *gpuGroup, allocs allocations) GPU {
	out := GPU{Node: nd.name, Device: g.name, Published: g.whole != nil, Partitioning: PartitioningNone}
	// Attributes common to the GPU come from the whole device, or else
	// from a partition (they carry the parent's vendor, model, ...).
	src := g.whole
	if src == nil && len(g.partitions) > 0 {
		src = g.partitions[0].dev
	}
	if src != nil {
		out.Vendor = attrString(src, publish.AttrVendor)
		out.Model = attrString(src, publish.AttrModel)
		out.ProductName = attrString(src, publish.AttrProductName)
		out.Simulated = isSimulated(src)
		out.PCIeRoot = attrString(src, attrPCIeRoot)
		if v, ok := attrInt(src, attrNUMANode); ok {
			out.NUMANode = &v
		}
	}
	if g.whole != nil {
		w := g.whole
		out.UUID = attrString(w, publish.AttrUUID)
		out.MemoryBytes = capacityBytes(w)
		out.Fabric = attrString(w, publish.AttrFabric)
		out.FabricIsland = attrString(w, publish.AttrFabricIsland)
		out.FabricBandwidthGBps, _ = attrInt(w, publish.AttrFabricBandwidth)
		out.PCIBusID = attrString(w, attrPCIBusID)
		out.Shared = isShared(w)
		out.Holders = allocs[deviceKey{g.pool, w.Name}]
		out.Taints = taintsOf(w)
		if out.Shared {
			out.SharedMemory = sharedUsage(w, out.Holders)
		}
	} else if src != nil {
		out.UUID = attrString(src, publish.AttrParentUUID)
	}

	cs, dynamic := nd.counterSets[deviceKey{g.pool, g.name}]
	switch {
	case dynamic:
		out.Partitioning = PartitioningDynamic
		out.MemorySlices = &Usage{Total: int64(countMemorySlices(cs))}
	case len(g.partitions) > 0:
		out.Partitioning = PartitioningStatic
	}
	used := map[string]bool{}
	if dynamic && len(out.Holders) > 0 {
		markSlices(used, g.whole, g.name)
	}
	for _, p := range g.partitions {
		out.Taints = mergeTaints(out.Taints, taintsOf(p.dev))
		if out.PartitionKind == "" {
			out.PartitionKind = attrString(p.dev, publish.AttrPartitionKind)
		}
		holders := allocs[p.key()]
		if dynamic {
			if len(holders) == 0 {
				continue // an unallocated placement is only a possibility
			}
			markSlices(used, p.dev, g.name)
		}
		out.Partitions = append(out.Partitions, buildPartition(p.dev, g.name, holders))
	}
	if dynamic {
		out.MemorySlices.Used = int64(len(used))
	}
	return out
}

func buildPartition(d *resourceapi.Device, parent string, holders []Holder) Partition {
	p := Partition{
		Device:      d.Name,
		Kind:        attrString(d, publish.AttrPartitionKind),
		Profile:     attrString(d, publish.AttrProfile),
		UUID:        attrString(d, publish.AttrUUID),
		MemoryBytes: capacityBytes(d),
		Taints:      taintsOf(d),
		Shared:      isShared(d),
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
	slices.SortFunc(p.MemorySlices, compareDeviceNames)
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
	u := &Usage{Total: capacityBytes(d)}
	for _, h := range holders {
		u.Used += h.ConsumedMemoryBytes
	}
	return u
}

func taintsOf(d *resourceapi.Device) []Taint {
	var out []Taint
	for _, t := range d.Taints {
		out = append(out, Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	return out
}

// mergeTaints adds the taints of add that ts lacks.
func mergeTaints(ts, add []Taint) []Taint {
	for _, t := range add {
		if !slices.Contains(ts, t) {
			ts = append(ts, t)
		}
	}
	return ts
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
