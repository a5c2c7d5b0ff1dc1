package explain

import (
	"context"
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/tessera-gpu/tessera/internal/deviceclasses"
	"github.com/tessera-gpu/tessera/internal/inspect"
)

// Features are the DRA features the allocator runs with: those on by
// default in Kubernetes 1.37 (as internal/alloctest).
var Features = structured.Features{
	PrioritizedList:      true,
	PartitionableDevices: true,
	DeviceTaints:         true,
	ConsumableCapacity:   true,
	AdminAccess:          true,
}

func claimKey(c *resourceapi.ResourceClaim) string {
	if c.Namespace == "" {
		return c.Name
	}
	return c.Namespace + "/" + c.Name
}

// pendingCopy is the claim as the allocator is given it: without status,
// with the defaults the API server would have applied (a claim read from a
// file may omit allocationMode and count).
func pendingCopy(c *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
	c = c.DeepCopy()
	c.Status = resourceapi.ResourceClaimStatus{}
	if c.UID == "" {
		c.UID = types.UID("explain-" + c.Namespace + "-" + c.Name)
	}
	for i := range c.Spec.Devices.Requests {
		r := &c.Spec.Devices.Requests[i]
		if e := r.Exactly; e != nil {
			if e.AllocationMode == "" {
				e.AllocationMode = resourceapi.DeviceAllocationModeExactCount
			}
			if e.AllocationMode == resourceapi.DeviceAllocationModeExactCount && e.Count == 0 {
				e.Count = 1
			}
		}
		for j := range r.FirstAvailable {
			s := &r.FirstAvailable[j]
			if s.AllocationMode == "" {
				s.AllocationMode = resourceapi.DeviceAllocationModeExactCount
			}
			if s.AllocationMode == resourceapi.DeviceAllocationModeExactCount && s.Count == 0 {
				s.Count = 1
			}
		}
	}
	return c
}

// explainer holds what every node's explanation needs.
type explainer struct {
	ctx      context.Context
	classes  deviceclasses.Lister
	cache    *cel.Cache
	state    structured.AllocatedState
	holders  inspect.Allocations
	counters map[counterKey][]string // claims consuming each counter
}

type counterKey struct{ pool, set, counter string }

// Explain runs the scheduler's allocator for claims (a pod's claims are
// allocated together, as the scheduler does) on every node of in's
// snapshot, with every other allocated claim of the snapshot holding its
// devices, and explains each node's verdict. pod names the pod, if any.
func Run(ctx context.Context, in *Input, pod string, claims []*resourceapi.ResourceClaim) (*Explanation, error) {
	if len(claims) == 0 {
		return nil, fmt.Errorf("no claim to explain")
	}
	ex, pending, explained := newExplanation(in, pod, claims)

	e := newExplainer(ctx, in)
	e.holdAllocated(in.Snapshot.Claims, explained)
	alloc, err := structured.NewAllocator(ctx, Features, e.state, e.classes, namedSlices(in.Snapshot.Slices), e.cache)
	if err != nil {
		return nil, err
	}

	for _, n := range inspect.NodesOf(in.Snapshot) {
		ex.Nodes = append(ex.Nodes, e.verdict(alloc, n, pending))
	}
	sortVerdicts(ex.Nodes)
	return ex, nil
}

// newExplanation starts the explanation of claims with its notes on the
// input, and returns the claims as the allocator is given them and the
// keys of the claims explained.
func newExplanation(in *Input, pod string, claims []*resourceapi.ResourceClaim) (*Explanation, []*resourceapi.ResourceClaim, sets.Set[string]) {
	ex := &Explanation{Pod: pod}
	if in.ShippedClasses {
		ex.Notes = append(ex.Notes, "DeviceClasses: none in the input, using the ones shipped with Tessera")
	}
	explained := sets.New[string]()
	var pending []*resourceapi.ResourceClaim
	for _, c := range claims {
		ex.Claims = append(ex.Claims, claimKey(c))
		explained.Insert(claimKey(c))
		if c.Status.Allocation != nil {
			ex.Notes = append(ex.Notes, fmt.Sprintf("claim %s is already allocated; explained as if it were pending", claimKey(c)))
		}
		pending = append(pending, pendingCopy(c))
	}
	return ex, pending, explained
}

// newExplainer is an explainer over in's classes with nothing allocated yet.
func newExplainer(ctx context.Context, in *Input) *explainer {
	return &explainer{
		ctx:     ctx,
		classes: deviceclasses.Lister(in.Classes),
		cache:   cel.NewCache(100, cel.Features{EnableConsumableCapacity: true}),
		state: structured.AllocatedState{
			AllocatedDevices:         sets.New[structured.DeviceID](),
			AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
			AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
		},
		counters: map[counterKey][]string{},
	}
}

// holdAllocated builds the allocated state as the scheduler does, from
// every allocated claim but the explained ones, and records who holds
// each device.
func (e *explainer) holdAllocated(claims []resourceapi.ResourceClaim, explained sets.Set[string]) {
	var others []resourceapi.ResourceClaim
	for i := range claims {
		c := &claims[i]
		if c.Status.Allocation == nil || explained.Has(claimKey(c)) {
			continue
		}
		others = append(others, *c)
		e.markAllocated(c.Status.Allocation.Devices.Results)
	}
	e.holders = inspect.AllocationsOf(others)
}

// namedSlices copies in, naming each slice that has only a generateName
// (one read from a file), as the API server would have.
func namedSlices(in []resourceapi.ResourceSlice) []*resourceapi.ResourceSlice {
	out := make([]*resourceapi.ResourceSlice, len(in))
	for i := range in {
		s := in[i].DeepCopy()
		if s.Name == "" {
			s.Name = fmt.Sprintf("%s%05d", s.GenerateName, i)
		}
		out[i] = s
	}
	return out
}

// verdict is node n's answer for the pending claims: the allocator's
// verdict and picks, each request's and constraint's report, and the
// reasons when they do not fit.
func (e *explainer) verdict(alloc structured.Allocator, n *inspect.NodeDevices, pending []*resourceapi.ResourceClaim) NodeVerdict {
	e.indexCounters(n)
	v := NodeVerdict{Node: n.Name}
	res, err := alloc.Allocate(e.ctx, n.Node(), pending)
	switch {
	case err != nil:
		v.Error = err.Error()
	case res != nil:
		v.Fits = true
		v.Devices = picks(res, pending)
	}
	for _, c := range pending {
		reports := e.requests(n, c)
		v.Requests = append(v.Requests, reports...)
		v.Constraints = append(v.Constraints, constraintReports(c, reports)...)
	}
	if !v.Fits {
		v.Reasons = reasons(&v)
		for _, r := range []string{windowReason(n, v.Requests), domainReason(n, v.Requests)} {
			if r != "" {
				v.Reasons = append(v.Reasons, r)
			}
		}
	}
	return v
}

// picks lists the devices of the allocation results res of pending, in
// the allocator's order.
func picks(res []resourceapi.AllocationResult, pending []*resourceapi.ResourceClaim) []Pick {
	var out []Pick
	for i, r := range res {
		for _, d := range r.Devices.Results {
			out = append(out, pickOf(claimKey(pending[i]), d))
		}
	}
	return out
}

// pickOf is one allocated device of claim, with what it consumes of each
// capacity, by capacity name (nothing for what it consumes none of).
func pickOf(claim string, d resourceapi.DeviceRequestAllocationResult) Pick {
	p := Pick{Claim: claim, Request: d.Request, Pool: d.Pool, Device: d.Device, Shared: d.ShareID != nil}
	for _, name := range slices.Sorted(mapsKeys(d.ConsumedCapacity)) {
		q := d.ConsumedCapacity[name]
		if q.IsZero() {
			continue
		}
		p.Consumed = append(p.Consumed, fmt.Sprintf("%s=%s", name, q.String()))
	}
	return p
}

// sortVerdicts puts the nodes the claims fit on first, each part by node
// name.
func sortVerdicts(nodes []NodeVerdict) {
	slices.SortStableFunc(nodes, func(a, b NodeVerdict) int {
		if a.Fits != b.Fits {
			if a.Fits {
				return -1
			}
			return 1
		}
		return inspect.CompareDeviceNames(a.Node, b.Node)
	})
}

func mapsKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// indexCounters records, for node n, which claims consume each counter of
// its pools' counter sets.
