package inspect

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/pkg/publish"
)

// nodeDevices is one node's published devices: the newest generation of each
// of its pools, in slice order.
type nodeDevices struct {
	name    string
	devices []poolDevice
	// counterSets holds each pool's shared counter sets by name.
	counterSets map[deviceKey]resourceapi.CounterSet
}

// poolDevice is a device and the pool it is published in.
type poolDevice struct {
	pool string
	dev  *resourceapi.Device
}

// deviceKey names a device (or a counter set) the way an allocation result
// does: pool and name (the driver is always DriverName).
type deviceKey struct{ pool, name string }

func (d poolDevice) key() deviceKey { return deviceKey{d.pool, d.dev.Name} }

// nodesOf groups the snapshot's slices by node. A pool being republished may
// briefly have slices of two generations; only the newest counts.
func nodesOf(s *Snapshot) []*nodeDevices {
	newest := map[string]int64{}
	for i := range s.Slices {
		p := s.Slices[i].Spec.Pool
		if g, ok := newest[p.Name]; !ok || p.Generation > g {
			newest[p.Name] = p.Generation
		}
	}
	byName := map[string]*nodeDevices{}
	for i := range s.Slices {
		sl := &s.Slices[i]
		pool := sl.Spec.Pool.Name
		if sl.Spec.Pool.Generation != newest[pool] {
			continue
		}
		node := pool
		if sl.Spec.NodeName != nil && *sl.Spec.NodeName != "" {
			node = *sl.Spec.NodeName
		}
		n := byName[node]
		if n == nil {
			n = &nodeDevices{name: node, counterSets: map[deviceKey]resourceapi.CounterSet{}}
			byName[node] = n
		}
		for j := range sl.Spec.Devices {
			n.devices = append(n.devices, poolDevice{pool: pool, dev: &sl.Spec.Devices[j]})
		}
		for _, cs := range sl.Spec.SharedCounters {
			n.counterSets[deviceKey{pool, cs.Name}] = cs
		}
	}
	out := make([]*nodeDevices, 0, len(byName))
	for _, n := range byName {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b *nodeDevices) int { return strings.Compare(a.name, b.name) })
	return out
}

// gpuGroup is one physical GPU: its whole-GPU device (nil when the GPU is
// published only as partitions, e.g. in MIG mode) and its partition devices.
type gpuGroup struct {
	name       string
	pool       string
	whole      *resourceapi.Device
	partitions []poolDevice
}

var partitionName = regexp.MustCompile(`^(gpu-[0-9]+)-`)

// gpuGroups groups a node's devices by physical GPU, in GPU number order.
// A partition's parent is the whole GPU whose uuid is its parentUUID, or
// else the GPU its name starts with (pkg/publish/names.go).
func (n *nodeDevices) gpuGroups() []*gpuGroup {
	var out []*gpuGroup
	byName := map[deviceKey]*gpuGroup{}
	byUUID := map[string]*gpuGroup{}
	for _, d := range n.devices {
		if attrString(d.dev, publish.AttrType) != publish.TypeGPU {
			continue
		}
		g := &gpuGroup{name: d.dev.Name, pool: d.pool, whole: d.dev}
		out = append(out, g)
		byName[d.key()] = g
		if u := attrString(d.dev, publish.AttrUUID); u != "" {
			byUUID[u] = g
		}
	}
	for _, d := range n.devices {
		if attrString(d.dev, publish.AttrType) != publish.TypePartition {
			continue
		}
		g := byUUID[attrString(d.dev, publish.AttrParentUUID)]
		if g == nil || g.pool != d.pool {
			parent := d.dev.Name
			if m := partitionName.FindStringSubmatch(d.dev.Name); m != nil {
				parent = m[1]
			}
			g = byName[deviceKey{d.pool, parent}]
			if g == nil {
				g = &gpuGroup{name: parent, pool: d.pool}
				out = append(out, g)
				byName[deviceKey{d.pool, parent}] = g
			}
		}
		g.partitions = append(g.partitions, d)
	}
	slices.SortStableFunc(out, func(a, b *gpuGroup) int { return compareDeviceNames(a.name, b.name) })
	return out
}

// compareDeviceNames orders names with their numbers compared as numbers,
// so gpu-2 comes before gpu-10.
func compareDeviceNames(a, b string) int {
	for a != "" && b != "" {
		ia, ib := digitsEnd(a), digitsEnd(b)
		if ia > 0 && ib > 0 {
			na, _ := strconv.ParseUint(a[:ia], 10, 64)
			nb, _ := strconv.ParseUint(b[:ib], 10, 64)
			if na != nb {
				if na < nb {
					return -1
				}
				return 1
			}
			a, b = a[ia:], b[ib:]
			continue
		}
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		a, b = a[1:], b[1:]
	}
	return len(a) - len(b)
}

func digitsEnd(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}
