package publish

import (
	"fmt"
	"sort"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/tessera-gpu/tessera/internal/fabric"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/isolation"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/pci"
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
	// Unshared says why a device the node would share by capacity is
	// published whole; empty when it is shared, when the node does not
	// share, and on a dynamic GPU (counters and shares never mix).
	Unshared UnsharedReason
	// Attributes are the device's attributes as published (or, for a
	// passed GPU, as they would be): what a prepared claim's device
	// metadata starts from. Shared with the slices: read only.
	Attributes map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
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
	// Slices are each dynamic GPU's memory slices (by GPU device name):
	// free, and free but of no use to any published profile now.
	Slices map[string]MemorySlices
	// LeftOut are the placements of dynamic GPUs left out of the slices, by
	// name: partitions on their GPU take their room, or their GPU is
	// outside the window (window.go). A claim allocated one from slices the
	// scheduler had before (a stale claim's partition still there) is
	// judged by the conflict, not as unknown.
	LeftOut map[string]Entry
	// Open names the dynamic GPUs whose placements are published (every
	// one without a window): what the next build's Options.Open reads.
	// Window is what the window knew of each dynamic GPU (WindowMoved);
	// OpenDeferred is set when Options.DeferOpen kept GPUs closed that the
	// window would open.
	Open         map[string]bool
	Window       []WindowGPU
	OpenDeferred bool
	// Node is the inventory the devices were built from (each Entry's GPU
	// points into it), with the links between its GPUs: what a claim's
	// NCCL topology file is written from (internal/nccltopo). Passed GPUs
	// the backend no longer lists are in it (Options.Passed).
	Node *inventory.Node
	// Passed are the whole GPUs passed through to virtual machines
	// (Options.Passed), by device name: none of their devices is
	// published, and their claims resolve them here.
	Passed map[string]Entry
}

// group is a device's place in publishing order (the package doc's rules).
type group int

const (
	groupWhole     group = iota // whole GPUs (rules 1, 2)
	groupStatic                 // partitions that exist (rule 3)
	groupPlacement              // dynamic placements, filled from the other end (rules 4, 5)
)

// item is a device being placed in publishing order.
type item struct {
	dev   resourceapi.Device
	entry Entry
	// Sort keys (see the package doc).
	group                   group
	parent                  int
	mem                     int64
	stranded, damage, start int
	// blocked is set on a placement the partitions that exist leave no
	// room for; tier is a placement's rank within its GPU (occupancy.go).
	blocked bool
	tier    int
	// placeholder stands for a dynamic GPU's placements, published or not:
	// it keeps their place in the slices, and is no device.
	placeholder bool
	// dynamic is set on the whole device of a dynamic GPU (layout.go).
	dynamic bool
}

// Build turns a node's inventory into the node's one pool of
// ResourceSlices. The pool is named after the node. Devices of unhealthy
// GPUs are still published (health is reported separately).
//
// With Static partitioning a partition-mode GPU is published as its
// partitions only, since the whole GPU cannot run work while MIG mode is on.
// With Dynamic, see dynamicGPU.
func Build(nodeName string, n *inventory.Node, opts Options) (*Result, error) {
	n, isPassed := withPassed(n, opts.Passed)
	fabrics, err := fabric.Compute(n)
	if err != nil {
		return nil, fmt.Errorf("node %s: topology: %w", nodeName, err)
	}
	order, err := busOrder(n)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", nodeName, err)
	}
	rank := gpuRank(n, order, fabrics)
	res := &Result{Pool: nodeName, Devices: map[string]Entry{}, Node: n}
	res.Window, res.Open, res.OpenDeferred = window(n, order, rank, opts)
	var items []item
	var counterSets []resourceapi.CounterSet
	for pos, gi := range order {
		g := &n.GPUs[gi]
		name := names.GPU(pos)
		if isPassed[gi] {
			if err := res.pass(name, g, fabrics[gi]); err != nil {
				return nil, fmt.Errorf("node %s: %w", nodeName, err)
			}
			continue
		}
		dyn, mode := dynamicGPU(g, opts.Partitioning)
		if g.Partitioning != nil {
			mode.Device, mode.UUID = name, g.UUID
		}
		var its []item
		if dyn {
			var set resourceapi.CounterSet
			var ms *MemorySlices
			var leftOut []Entry
			set, its, leftOut, mode.Withheld, ms, err = dynamicDevices(name, g, fabrics[gi], rank[gi], res.Open[name], opts.Held, opts.Profiles)
			counterSets = append(counterSets, set)
			for _, e := range leftOut {
				if res.LeftOut == nil {
					res.LeftOut = map[string]Entry{}
				}
				res.LeftOut[e.Name] = e
			}
			if ms != nil {
				if res.Slices == nil {
					res.Slices = map[string]MemorySlices{}
				}
				res.Slices[name] = *ms
			}
		} else {
			its, err = staticDevices(name, g, fabrics[gi], rank[gi], opts)
		}
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", nodeName, err)
		}
		if g.Partitioning != nil {
			res.Modes = append(res.Modes, mode)
		}
		items = append(items, its...)
	}
	// Tiers depend on the order without them (the first free placement of
	// each profile), so the sort runs again once they are set.
	sortItems(items)
	tierPlacements(items)
	sortItems(items)
	if err := taint(items, opts.Taints); err != nil {
		return nil, fmt.Errorf("node %s: %w", nodeName, err)
	}
	isolate(items, opts.Isolation)
	iommu(items, opts.IOMMUGroup)
	pool, err := paginate(items, counterSets, res)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", nodeName, err)
	}
	res.Resources = resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{nodeName: pool}}
	return res, nil
}

// staticDevices are a GPU published by what it is now: the whole GPU
// unless its partition mode is on, and the partitions that exist; shared
// when the node shares by capacity.
func staticDevices(name string, g *inventory.GPU, f fabric.Attrs, rank int, opts Options) ([]item, error) {
	var items []item
	if g.Partitioning == nil || !g.Partitioning.Enabled {
		d, err := wholeGPUDevice(name, g, f)
		if err != nil {
			return nil, fmt.Errorf("device %s (%s): %w", name, g.PCIBusID, err)
		}
		items = append(items, item{dev: d, entry: Entry{Name: name, GPU: g}, group: groupWhole, parent: rank})
	}
	for pi := range g.Partitions {
		p := &g.Partitions[pi]
		pname := PartitionName(name, *p)
		d, err := partitionDevice(pname, g, p, f)
		if err != nil {
			return nil, fmt.Errorf("device %s: %w", pname, err)
		}
		items = append(items, item{dev: d, entry: Entry{Name: pname, GPU: g, Partition: p}, group: groupStatic, parent: rank, mem: p.MemoryBytes, start: p.Placement.Start})
	}
	for i := range items {
		if err := opts.share(&items[i]); err != nil {
			return nil, err
		}
	}
	return items, nil
}

// taint gives every device its GPU's taints.
func taint(items []item, taints func(gpu string) []resourceapi.DeviceTaint) error {
	if taints == nil {
		return nil
	}
	for i := range items {
		if items[i].placeholder {
			continue
		}
		ts := taints(items[i].entry.GPU.UUID)
		if len(ts) > MaxTaintsPerDevice {
			return fmt.Errorf("device %s has %d taints, limit %d", items[i].dev.Name, len(ts), MaxTaintsPerDevice)
		}
		if len(ts) > 0 {
			items[i].dev.Taints = ts
		}
	}
	return nil
}

// isolate publishes how each device's shares and MPS limits are held: a
// placement is judged as the partition carving it makes.
func isolate(items []item, assess func(*inventory.GPU, *inventory.Partition) isolation.Assessment) {
	if assess == nil {
		return
	}
	for i := range items {
		if items[i].placeholder {
			continue
		}
		e := items[i].entry
		p := e.Partition
		if p == nil && e.Carve != nil {
			p = &inventory.Partition{Kind: e.GPU.Partitioning.Kind, Profile: e.Carve.Profile, Placement: e.Carve.Placement}
		}
		a := assess(e.GPU, p)
		attrs(items[i].dev.Attributes).str(AttrMemoryIsolation, string(a.Level))
		if a.Level == isolation.Process {
			// Only where MPS holds shares: elsewhere no daemon runs.
			items[i].dev.Attributes[AttrMPSNamespace] = resourceapi.DeviceAttribute{BoolValue: &a.MPSNamespace}
		}
	}
}

// iommu gives each whole GPU published whole and unshared that can be
// passed through its IOMMU group.
func iommu(items []item, group func(*inventory.GPU) (int, bool)) {
	if group == nil {
		return
	}
	for i := range items {
		e := items[i].entry
		if items[i].placeholder || e.Partition != nil || e.Carve != nil || e.Shared != nil {
			continue
		}
		if g, ok := group(e.GPU); ok {
			attrs(items[i].dev.Attributes).integer(AttrIOMMUGroup, int64(g))
		}
	}
}

// sortItems puts devices in allocation priority order (package doc).
func sortItems(items []item) {
	sort.SliceStable(items, func(a, b int) bool {
		x, y := &items[a], &items[b]
		if x.group != y.group {
			return x.group < y.group
		}
		placement := x.group == groupPlacement
		if x.parent != y.parent {
			if placement {
				return x.parent > y.parent // dynamic placements fill from the other end
			}
			return x.parent < y.parent
		}
		if x.tier != y.tier {
			return x.tier < y.tier
		}
		if x.mem != y.mem {
			return lessKnown(x.mem, y.mem)
		}
		if placement && x.entry.Carve.Profile != y.entry.Carve.Profile {
			return x.entry.Carve.Profile < y.entry.Carve.Profile
		}
		if x.stranded != y.stranded {
			return x.stranded < y.stranded
		}
		if x.damage != y.damage {
			return x.damage < y.damage
		}
		if placement {
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

// lessKnown orders capacities ascending with unknown (0, inventory.GPU's
// convention) after every known value. A GPU of unknown memory is not the
// smallest, and first in line it would be the device every claim's memory
// selector meets first: on a device without the capacity an unguarded
// selector is a CEL "no such key" error that stops the claim's allocation.
func lessKnown(a, b int64) bool {
	if (a == 0) != (b == 0) {
		return b == 0
	}
	return a < b
}

// gpuRank orders GPUs: smaller first (unknown last), then NUMA node,
// island, bus position.
func gpuRank(n *inventory.Node, order []int, fabrics []fabric.Attrs) map[int]int {
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
			return lessKnown(ga.MemoryBytes, gb.MemoryBytes)
		}
		if ga.ComputeUnits != gb.ComputeUnits {
			return lessKnown(ga.ComputeUnits, gb.ComputeUnits)
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
