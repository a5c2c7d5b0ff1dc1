package inspect

import (
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// NodeDevices is one node's published devices: the newest generation of each
// of its pools, in slice order.
type NodeDevices struct {
	Name    string
	Devices []PoolDevice
	// CounterSets holds each pool's shared counter sets by name.
	CounterSets map[DeviceKey]resourceapi.CounterSet
}

// PoolDevice is a device and the pool it is published in.
type PoolDevice struct {
	Pool string
	Dev  *resourceapi.Device
}

// DeviceKey names a device (or a counter set) the way an allocation result
// does: pool and name (the driver is always names.DriverName).
type DeviceKey struct{ Pool, Name string }

// Key is the device's DeviceKey.
func (d PoolDevice) Key() DeviceKey { return DeviceKey{d.Pool, d.Dev.Name} }

// NodesOf groups the snapshot's slices by node. A pool being republished may
// briefly have slices of two generations; only the newest counts. A slice
// of no node (a multi-node NVLink domain's IMEX channels, selecting its
// nodes by label) adds its devices to each node its selector matches, by
// the labels that node's agent sets (Labels): they are that node's to
// allocate too.
func NodesOf(s *Snapshot) []*NodeDevices {
	newest := map[string]int64{}
	for i := range s.Slices {
		p := s.Slices[i].Spec.Pool
		if g, ok := newest[p.Name]; !ok || p.Generation > g {
			newest[p.Name] = p.Generation
		}
	}
	byName := map[string]*NodeDevices{}
	var shared []*resourceapi.ResourceSlice
	for i := range s.Slices {
		sl := &s.Slices[i]
		pool := sl.Spec.Pool.Name
		if sl.Spec.Pool.Generation != newest[pool] {
			continue
		}
		if sl.Spec.NodeName == nil && sl.Spec.NodeSelector != nil {
			shared = append(shared, sl)
			continue
		}
		node := pool
		if sl.Spec.NodeName != nil && *sl.Spec.NodeName != "" {
			node = *sl.Spec.NodeName
		}
		n := byName[node]
		if n == nil {
			n = &NodeDevices{Name: node, CounterSets: map[DeviceKey]resourceapi.CounterSet{}}
			byName[node] = n
		}
		n.add(sl)
	}
	out := make([]*NodeDevices, 0, len(byName))
	for _, n := range byName {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b *NodeDevices) int { return strings.Compare(a.Name, b.Name) })
	for _, sl := range shared {
		for _, n := range out {
			if ok, _ := nodeaffinity.NewLazyErrorNodeSelector(sl.Spec.NodeSelector).Match(n.Node()); ok {
				n.add(sl)
			}
		}
	}
	return out
}

// add adds sl's devices and counter sets to n.
func (n *NodeDevices) add(sl *resourceapi.ResourceSlice) {
	pool := sl.Spec.Pool.Name
	for j := range sl.Spec.Devices {
		n.Devices = append(n.Devices, PoolDevice{Pool: pool, Dev: &sl.Spec.Devices[j]})
	}
	for _, cs := range sl.Spec.SharedCounters {
		n.CounterSets[DeviceKey{pool, cs.Name}] = cs
	}
}

// Labels are the labels the scheduler matches slices' node selectors
// against, as the node's agent sets them: its hostname, and the
// multi-node NVLink domain its GPUs publish (fabricDomain), where they
// name exactly one.
func (n *NodeDevices) Labels() map[string]string {
	l := map[string]string{"kubernetes.io/hostname": n.Name}
	domain := ""
	for _, d := range n.Devices {
		if AttrString(d.Dev, publish.AttrType) != publish.TypeGPU {
			continue
		}
		switch v := AttrString(d.Dev, publish.AttrFabricDomain); {
		case v == "":
		case domain == "":
			domain = v
		case domain != v:
			return l // several: the agent sets none
		}
	}
	if domain != "" {
		l[names.NodeLabelFabricDomain] = domain
	}
	return l
}

// Node is the Node object the allocator filters n as: its name and Labels.
func (n *NodeDevices) Node() *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels()}}
}

// GPUGroup is one physical GPU: its whole-GPU device (nil when the GPU is
// published only as partitions, e.g. in MIG mode) and its partition devices.
type GPUGroup struct {
	Name       string
	Pool       string
	Whole      *resourceapi.Device
	Partitions []PoolDevice
}

// GPUGroups groups a node's devices by physical GPU, in GPU number order.
// A partition's parent is the whole GPU whose uuid is its parentUUID, or
// else the GPU its name starts with (internal/publish/names.go).
func (n *NodeDevices) GPUGroups() []*GPUGroup {
	var out []*GPUGroup
	byName := map[DeviceKey]*GPUGroup{}
	byUUID := map[string]*GPUGroup{}
	for _, d := range n.Devices {
		if AttrString(d.Dev, publish.AttrType) != publish.TypeGPU {
			continue
		}
		g := &GPUGroup{Name: d.Dev.Name, Pool: d.Pool, Whole: d.Dev}
		out = append(out, g)
		byName[d.Key()] = g
		if u := AttrString(d.Dev, publish.AttrUUID); u != "" {
			byUUID[u] = g
		}
	}
	for _, d := range n.Devices {
		if AttrString(d.Dev, publish.AttrType) != publish.TypePartition {
			continue
		}
		g := byUUID[AttrString(d.Dev, publish.AttrParentUUID)]
		if g == nil || g.Pool != d.Pool {
			parent := PartitionParent(d.Dev.Name)
			g = byName[DeviceKey{d.Pool, parent}]
			if g == nil {
				g = &GPUGroup{Name: parent, Pool: d.Pool}
				out = append(out, g)
				byName[DeviceKey{d.Pool, parent}] = g
			}
		}
		g.Partitions = append(g.Partitions, d)
	}
	slices.SortStableFunc(out, func(a, b *GPUGroup) int { return CompareDeviceNames(a.Name, b.Name) })
	return out
}
