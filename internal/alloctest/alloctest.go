// Package alloctest runs the Kubernetes scheduler's own structured allocator
// (k8s.io/dynamic-resource-allocation/structured) with the real CEL library
// over Tessera's slices and shipped DeviceClasses, for tests and benchmarks.
package alloctest

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/tessera-gpu/tessera/internal/deviceclasses"
)

// Features are the DRA features on by default in Kubernetes 1.37.
var Features = structured.Features{
	PrioritizedList:      true,
	PartitionableDevices: true,
	DeviceTaints:         true,
	ConsumableCapacity:   true,
	AdminAccess:          true,
}

// Classes parses the shipped DeviceClasses.
func Classes() ([]*resourceapi.DeviceClass, error) { return deviceclasses.Parse() }

// Cluster is a set of published slices and the devices already allocated.
type Cluster struct {
	Slices    []*resourceapi.ResourceSlice
	Classes   []*resourceapi.DeviceClass
	Allocated sets.Set[structured.DeviceID]
	// Shared and Consumed are the shares of multi-allocatable devices
	// (consumable capacity) and what they consume, as the scheduler keeps
	// them.
	Shared   sets.Set[structured.SharedDeviceID]
	Consumed structured.ConsumedCapacityCollection
	cache    *cel.Cache
}

// NewCluster names unnamed slices (a cluster would) and returns a Cluster.
func NewCluster(slices []*resourceapi.ResourceSlice, classes []*resourceapi.DeviceClass) *Cluster {
	for i, s := range slices {
		if s.Name == "" {
			s.Name = fmt.Sprintf("%s%05d", s.GenerateName, i)
		}
	}
	return &Cluster{
		Slices: slices, Classes: classes,
		Allocated: sets.New[structured.DeviceID](),
		Shared:    sets.New[structured.SharedDeviceID](),
		Consumed:  structured.NewConsumedCapacityCollection(),
		cache:     cel.NewCache(100, cel.Features{EnableConsumableCapacity: true}),
	}
}

// Allocate allocates the claims together on node, as the scheduler's Filter
// does, and on success records their devices as allocated. A nil result
// with nil error means the claims do not fit on that node.
func (c *Cluster) Allocate(ctx context.Context, node string, claims ...*resourceapi.ResourceClaim) ([]resourceapi.AllocationResult, error) {
	return c.AllocateOn(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, claims...)
}

// AllocateOn is Allocate on a Node object, whose labels a slice's node
// selector is matched against.
func (c *Cluster) AllocateOn(ctx context.Context, node *v1.Node, claims ...*resourceapi.ResourceClaim) ([]resourceapi.AllocationResult, error) {
	a, err := c.NewAllocator(ctx)
	if err != nil {
		return nil, err
	}
	res, err := a.Allocate(ctx, node, claims)
	if err != nil || res == nil {
		return nil, err
	}
	for _, r := range res {
		c.record(r, true)
	}
	for i, cl := range claims {
		cl.Status.Allocation = &res[i]
	}
	return res, nil
}

// Request is one exactly-counted request of a claim.
type Request struct {
	Name, Class string
	Count       int64
	CEL         []string
	// Capacity is what the request asks of each device's capacities
	// (consumable capacity): name to quantity, e.g. "memory": "7Gi".
	Capacity map[string]string
}

// Claim builds a claim. The allocator applies no API defaults, so
// allocation mode and count are set explicitly.
func Claim(name string, reqs ...Request) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)}}
	for _, r := range reqs {
		c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, resourceapi.DeviceRequest{Name: r.Name, Exactly: exact(r)})
	}
	return c
}

func exact(r Request) *resourceapi.ExactDeviceRequest {
	count := r.Count
	if count == 0 {
		count = 1
	}
	e := &resourceapi.ExactDeviceRequest{DeviceClassName: r.Class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}
	for _, expr := range r.CEL {
		e.Selectors = append(e.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: expr}})
	}
	if len(r.Capacity) > 0 {
		e.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{}}
		for name, q := range r.Capacity {
			e.Capacity.Requests[resourceapi.QualifiedName(name)] = resource.MustParse(q)
		}
	}
	return e
}

// FirstAvailable builds a claim with one request listing alternatives in
// order of preference.
func FirstAvailable(name string, alts ...Request) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)}}
	req := resourceapi.DeviceRequest{Name: "gpu"}
	for _, a := range alts {
		e := exact(a)
		req.FirstAvailable = append(req.FirstAvailable, resourceapi.DeviceSubRequest{
			Name: a.Name, DeviceClassName: e.DeviceClassName, Selectors: e.Selectors, AllocationMode: e.AllocationMode, Count: e.Count,
		})
	}
	c.Spec.Devices.Requests = append(c.Spec.Devices.Requests, req)
	return c
}

// MatchAttribute adds a constraint that all devices share attribute attr.
func MatchAttribute(c *resourceapi.ResourceClaim, attr string) *resourceapi.ResourceClaim {
	a := resourceapi.FullyQualifiedName(attr)
	c.Spec.Devices.Constraints = append(c.Spec.Devices.Constraints, resourceapi.DeviceConstraint{MatchAttribute: &a})
	return c
}

// DistinctAttribute adds a constraint that all devices differ in attr.
func DistinctAttribute(c *resourceapi.ResourceClaim, attr string) *resourceapi.ResourceClaim {
	a := resourceapi.FullyQualifiedName(attr)
	c.Spec.Devices.Constraints = append(c.Spec.Devices.Constraints, resourceapi.DeviceConstraint{DistinctAttribute: &a})
	return c
}

// Devices lists the allocated device names of a result in order.
func Devices(r resourceapi.AllocationResult) []string {
	var out []string
	for _, d := range r.Devices.Results {
		out = append(out, d.Device)
	}
	return out
}

// Release frees the devices of an allocation, as deleting its claim does.
func (c *Cluster) Release(r resourceapi.AllocationResult) {
	c.record(r, false)
}

// record adds (or removes) an allocation's devices to what is allocated, as
// the scheduler's allocated-devices cache does: a result with a ShareID is a
// share of a multi-allocatable device and counts by what it consumed.
func (c *Cluster) record(r resourceapi.AllocationResult, add bool) {
	for _, d := range r.Devices.Results {
		id := structured.MakeDeviceID(d.Driver, d.Pool, d.Device)
		switch {
		case d.ShareID != nil && add:
			c.Shared.Insert(structured.MakeSharedDeviceID(id, d.ShareID))
			c.Consumed.Insert(structured.NewDeviceConsumedCapacity(id, d.ConsumedCapacity))
		case d.ShareID != nil:
			c.Shared.Delete(structured.MakeSharedDeviceID(id, d.ShareID))
			c.Consumed.Remove(structured.NewDeviceConsumedCapacity(id, d.ConsumedCapacity))
		case add:
			c.Allocated.Insert(id)
		default:
			c.Allocated.Delete(id)
		}
	}
}
