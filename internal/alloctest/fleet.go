package alloctest

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/tessera-gpu/tessera/internal/deviceclasses"
	"github.com/tessera-gpu/tessera/internal/names"
)

// CloneNode copies the slices one node publishes (as publish.Objects renders
// them, node-local, one pool named after the node) for another node: a deep
// copy with the node name, pool name and generateName changed and the
// object name cleared, so the clone is what node `to` would publish from
// the same hardware. Building a node from a simulated machine is slow; a
// fleet builds one and clones it.
func CloneNode(src []*resourceapi.ResourceSlice, from, to string) []*resourceapi.ResourceSlice {
	out := make([]*resourceapi.ResourceSlice, len(src))
	for i, s := range src {
		c := s.DeepCopy()
		node := to
		c.Name = ""
		c.GenerateName = strings.Replace(c.GenerateName, "-"+from+"-", "-"+to+"-", 1)
		c.Spec.NodeName = &node
		if c.Spec.Pool.Name == from {
			c.Spec.Pool.Name = to
		}
		out[i] = c
	}
	return out
}

// Node is the Node object the allocator filters for.
func Node(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// NewAllocator is the scheduler's PreFilter: one allocator over every slice
// of the cluster and the devices already allocated. The result may be used
// for any number of nodes (Filter) and does not change c.
func (c *Cluster) NewAllocator(ctx context.Context) (structured.Allocator, error) {
	return structured.NewAllocator(ctx, Features, structured.AllocatedState{
		AllocatedDevices:         c.Allocated,
		AllocatedSharedDeviceIDs: c.Shared,
		AggregatedCapacity:       c.Consumed,
	}, deviceclasses.Lister(c.Classes), c.Slices, c.cache)
}

// Cycle is one scheduling cycle for a pod with claims, as kube-scheduler
// runs it: PreFilter builds one allocator over the whole cluster, Filter
// calls Allocate on every node. It allocates nothing and returns how many
// nodes the claims fit on.
func (c *Cluster) Cycle(ctx context.Context, nodes []*v1.Node, claims []*resourceapi.ResourceClaim) (int, error) {
	a, err := c.NewAllocator(ctx)
	if err != nil {
		return 0, err
	}
	fit := 0
	for _, n := range nodes {
		res, err := a.Allocate(ctx, n, claims)
		if err != nil {
			return fit, fmt.Errorf("node %s: %w", n.Name, err)
		}
		if res != nil {
			fit++
		}
	}
	return fit, nil
}

// MarkAllocated records device (of the node-local pool named after node)
// as allocated, as an existing claim's allocation would: a fleet replays
// allocations computed on one node onto its clones.
func (c *Cluster) MarkAllocated(node, device string) {
	c.Allocated.Insert(structured.MakeDeviceID(names.DriverName, node, device))
}

// MarkResult records an allocation computed on another node with the same
// slices (a fleet's template) as made on node: its devices whole, or its
// shares with what they consumed.
func (c *Cluster) MarkResult(node string, r resourceapi.AllocationResult) {
	r = *r.DeepCopy()
	for i := range r.Devices.Results {
		r.Devices.Results[i].Pool = node
	}
	c.record(r, true)
}
