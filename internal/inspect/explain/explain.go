package explain

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/tessera-gpu/tessera/deployments/deviceclasses"
	"github.com/tessera-gpu/tessera/internal/inspect"
	"github.com/tessera-gpu/tessera/internal/names"
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

// Explanation says, node by node, why pending claims can or cannot be
// allocated. The verdict of each node is the scheduler's allocator's
// (structured.Allocator.Allocate on that node); the rest explains it.
type Explanation struct {
	// Pod is set when the claims are a pod's.
	Pod    string   `json:"pod,omitempty"`
	Claims []string `json:"claims"`
	// Notes are remarks about the input, e.g. which DeviceClasses were used.
	Notes []string      `json:"notes,omitempty"`
	Nodes []NodeVerdict `json:"nodes"`
}

// NodeVerdict is one node's answer.
type NodeVerdict struct {
	Node string `json:"node"`
	Fits bool   `json:"fits"`
	// Error is a fatal allocator error (e.g. a CEL runtime error).
	Error string `json:"error,omitempty"`
	// Devices are the allocator's picks when the claims fit.
	Devices []Pick `json:"devices,omitempty"`
	// Reasons say in words why the claims do not fit.
	Reasons     []string           `json:"reasons,omitempty"`
	Requests    []RequestReport    `json:"requests"`
	Constraints []ConstraintReport `json:"constraints,omitempty"`
}

// Pick is one device of an allocation result.
type Pick struct {
	Claim   string `json:"claim"`
	Request string `json:"request"`
	Pool    string `json:"pool"`
	Device  string `json:"device"`
	// Shared is set for a share of a multi-allocatable device; Consumed is
	// what it consumes, e.g. memory=7Gi.
	Shared   bool     `json:"shared,omitempty"`
	Consumed []string `json:"consumed,omitempty"`
}

// RequestReport follows one request (or firstAvailable subrequest,
// "request/subrequest") over one node's devices, filter by filter.
type RequestReport struct {
	Claim   string `json:"claim"`
	Request string `json:"request"`
	// Alternative is the 1-based position of a firstAvailable subrequest.
	Alternative    int    `json:"alternative,omitempty"`
	Class          string `json:"deviceClass"`
	AllocationMode string `json:"allocationMode"`
	// Count is the number of devices needed (for All: every match).
	Count int64 `json:"count"`
	// Problem is set when the request cannot be evaluated (unknown class).
	Problem     string `json:"problem,omitempty"`
	NodeDevices int    `json:"nodeDevices"`
	// ClassMatched is how many of the node's devices the class selectors
	// match; Selectors how many of those each request selector matches on
	// its own; Matching how many all of them match.
	ClassMatched int              `json:"classMatched"`
	Selectors    []SelectorReport `json:"selectors,omitempty"`
	Matching     int              `json:"matching"`
	// Of the matching devices: held by other claims, blocked by exhausted
	// shared counters, tainted (not tolerated), without enough capacity
	// left, and usable.
	InUse             int             `json:"inUse"`
	InUseBy           []string        `json:"inUseBy,omitempty"`
	CountersExhausted int             `json:"countersExhausted"`
	Counters          []CounterReport `json:"exhaustedCounters,omitempty"`
	Tainted           int             `json:"tainted"`
	Taints            []string        `json:"taints,omitempty"`
	CapacityShort     int             `json:"capacityShort"`
	Usable            int             `json:"usable"`
	// Enough: Usable covers Count (for All: every matching device usable).
	Enough bool `json:"enough"`

	usable []inspect.PoolDevice
}

// SelectorReport is one CEL selector of a request evaluated alone over the
// devices its class matches.
type SelectorReport struct {
	Expression string `json:"expression"`
	Matched    int    `json:"matched"`
	// Errors counts devices the expression fails on (e.g. a missing
	// attribute); Error is the first message.
	Errors int    `json:"errors,omitempty"`
	Error  string `json:"error,omitempty"`
}

// CounterReport is a shared counter set whose counters are too low for
// some matching devices, and the claims holding them.
type CounterReport struct {
	Pool       string   `json:"pool"`
	CounterSet string   `json:"counterSet"`
	Counters   []string `json:"counters"`
	Devices    int      `json:"devices"`
	HeldBy     []string `json:"heldBy,omitempty"`
}

// ConstraintReport is one claim constraint checked against the usable
// devices of the requests it covers.
type ConstraintReport struct {
	Claim     string `json:"claim"`
	Kind      string `json:"kind"` // matchAttribute or distinctAttribute
	Attribute string `json:"attribute"`
	// Satisfiable is false when no set of usable devices can meet it.
	Satisfiable bool   `json:"satisfiable"`
	Message     string `json:"message"`

	moot bool
}

// Fitting returns the names of the nodes the claims fit on.
func (e *Explanation) Fitting() []string {
	var out []string
	for _, n := range e.Nodes {
		if n.Fits {
			out = append(out, n.Node)
		}
	}
	return out
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
	res, err := alloc.Allocate(e.ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}, pending)
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
		if w := windowReason(n, v.Requests); w != "" {
			v.Reasons = append(v.Reasons, w)
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
func (e *explainer) indexCounters(n *inspect.NodeDevices) {
	for _, d := range n.Devices {
		hs := e.holders[d.Key()]
		if len(hs) == 0 {
			continue
		}
		for _, cc := range d.Dev.ConsumesCounters {
			for name := range cc.Counters {
				k := counterKey{d.Pool, cc.CounterSet, name}
				for _, h := range hs {
					if !slices.Contains(e.counters[k], h.Claim) {
						e.counters[k] = append(e.counters[k], h.Claim)
					}
				}
			}
		}
	}
}

// available is what is left of each counter of n's counter sets after the
// allocated devices' consumption, as the allocator computes it.
func (e *explainer) available(n *inspect.NodeDevices) map[counterKey]resourceapi.Counter {
	out := map[counterKey]resourceapi.Counter{}
	for k, cs := range n.CounterSets {
		for name, c := range cs.Counters {
			out[counterKey{k.Pool, k.Name, name}] = *c.DeepCopy()
		}
	}
	for _, d := range n.Devices {
		if !structured.IsDeviceAllocated(structured.MakeDeviceID(names.DriverName, d.Pool, d.Dev.Name), &e.state) {
			continue
		}
		for _, cc := range d.Dev.ConsumesCounters {
			for name, c := range cc.Counters {
				k := counterKey{d.Pool, cc.CounterSet, name}
				if a, ok := out[k]; ok {
					a.Value.Sub(c.Value)
					out[k] = a
				}
			}
		}
	}
	return out
}

// requests reports every request (and subrequest) of c on node n.
func (e *explainer) requests(n *inspect.NodeDevices, c *resourceapi.ResourceClaim) []RequestReport {
	avail := e.available(n)
	var out []RequestReport
	for _, r := range c.Spec.Devices.Requests {
		if x := r.Exactly; x != nil {
			out = append(out, e.request(n, avail, c, requestSpec{
				name: r.Name, class: x.DeviceClassName, mode: x.AllocationMode, count: x.Count,
				selectors: x.Selectors, tolerations: x.Tolerations, capacity: x.Capacity,
				adminAccess: x.AdminAccess != nil && *x.AdminAccess,
			}))
			continue
		}
		for i, s := range r.FirstAvailable {
			rep := e.request(n, avail, c, requestSpec{
				name: r.Name + "/" + s.Name, class: s.DeviceClassName, mode: s.AllocationMode, count: s.Count,
				selectors: s.Selectors, tolerations: s.Tolerations, capacity: s.Capacity,
			})
			rep.Alternative = i + 1
			out = append(out, rep)
		}
	}
	return out
}

type requestSpec struct {
	name, class string
	mode        resourceapi.DeviceAllocationMode
	count       int64
	selectors   []resourceapi.DeviceSelector
	tolerations []resourceapi.DeviceToleration
	capacity    *resourceapi.CapacityRequirements
	adminAccess bool
}

// request follows request r of claim c over node n's devices, filter by
// filter, with avail what is left of n's counters.
func (e *explainer) request(n *inspect.NodeDevices, avail map[counterKey]resourceapi.Counter, c *resourceapi.ResourceClaim, r requestSpec) RequestReport {
	t := newRequestTally(RequestReport{
		Claim: claimKey(c), Request: r.name, Class: r.class, AllocationMode: string(r.mode), Count: r.count,
		NodeDevices: len(n.Devices),
	})
	class, err := e.classes.Get(r.class)
	if err != nil {
		t.rep.Problem = fmt.Sprintf("DeviceClass %s does not exist", r.class)
		return t.rep
	}
	t.rep.Selectors = selectorReports(r.selectors)
	for _, d := range n.Devices {
		if !e.selected(d, class.Spec.Selectors, r.selectors, &t.rep) {
			continue
		}
		t.rep.Matching++
		e.allocatorChecks(d, r, avail, t)
	}
	return t.report(r)
}

// requestTally is a request's report while it is counted over a node's
// devices, with what its lists are built from.
type requestTally struct {
	rep            RequestReport
	inUseBy        sets.Set[string]
	taints         sets.Set[string]
	exhausted      map[inspect.DeviceKey]*CounterReport
	exhaustedOrder []inspect.DeviceKey // counter sets in order of first shortage
}

func newRequestTally(rep RequestReport) *requestTally {
	return &requestTally{
		rep:       rep,
		inUseBy:   sets.New[string](),
		taints:    sets.New[string](),
		exhausted: map[inspect.DeviceKey]*CounterReport{},
	}
}

// selectorReports are a request's selectors before any device is counted.
func selectorReports(selectors []resourceapi.DeviceSelector) []SelectorReport {
	out := make([]SelectorReport, len(selectors))
	for i, s := range selectors {
		if s.CEL != nil {
			out[i].Expression = s.CEL.Expression
		}
	}
	return out
}

// selected says whether d matches its class's selectors and every one of
// the request's; it counts in rep what the class matches and what each
// request selector matches on its own, and where it fails.
func (e *explainer) selected(d inspect.PoolDevice, classSelectors, selectors []resourceapi.DeviceSelector, rep *RequestReport) bool {
	if ok, _ := e.matches(d, classSelectors); !ok {
		return false
	}
	rep.ClassMatched++
	all := true
	for i, s := range selectors {
		ok, err := e.matches(d, []resourceapi.DeviceSelector{s})
		if err != nil {
			rep.Selectors[i].Errors++
			if rep.Selectors[i].Error == "" {
				rep.Selectors[i].Error = fmt.Sprintf("%s: %v", d.Dev.Name, err)
			}
		}
		if ok {
			rep.Selectors[i].Matched++
		} else {
			all = false
		}
	}
	return all
}

// allocatorChecks counts matching device d under the first of the
// allocator's checks it fails, in the allocator's order, or as usable.
func (e *explainer) allocatorChecks(d inspect.PoolDevice, r requestSpec, avail map[counterKey]resourceapi.Counter, t *requestTally) {
	id := structured.MakeDeviceID(names.DriverName, d.Pool, d.Dev.Name)
	shared := inspect.IsShared(d.Dev)
	if !r.adminAccess && e.state.AllocatedDevices.Has(id) {
		t.rep.InUse++
		for _, h := range e.holders[d.Key()] {
			t.inUseBy.Insert(h.Claim)
		}
		return
	}
	if len(d.Dev.ConsumesCounters) > 0 && !(shared && e.capacityInUse(id)) {
		if short := shortCounters(d, avail); len(short) > 0 {
			t.countersExhausted(short, e.counters)
			return
		}
	}
	if taints := untolerated(d.Dev, r.tolerations); len(taints) > 0 {
		t.rep.Tainted++
		t.taints.Insert(taints...)
		return
	}
	if !e.capacityFits(id, d.Dev, r.capacity) {
		t.rep.CapacityShort++
		return
	}
	t.rep.Usable++
	t.rep.usable = append(t.rep.usable, d)
}

// countersExhausted counts a device blocked by the counters short, under
// the counter set of its first short counter, and records every short
// counter and the claims holding it (holders) in its set's report.
func (t *requestTally) countersExhausted(short []counterKey, holders map[counterKey][]string) {
	t.rep.CountersExhausted++
	for _, k := range short {
		ck := inspect.DeviceKey{Pool: k.pool, Name: k.set}
		cr := t.exhausted[ck]
		if cr == nil {
			cr = &CounterReport{Pool: k.pool, CounterSet: k.set}
			t.exhausted[ck] = cr
			t.exhaustedOrder = append(t.exhaustedOrder, ck)
		}
		if !slices.Contains(cr.Counters, k.counter) {
			cr.Counters = append(cr.Counters, k.counter)
		}
		for _, h := range holders[k] {
			if !slices.Contains(cr.HeldBy, h) {
				cr.HeldBy = append(cr.HeldBy, h)
			}
		}
	}
	t.exhausted[inspect.DeviceKey{Pool: short[0].pool, Name: short[0].set}].Devices++
}

// report is the finished report of request r: sorted lists, and whether
// the usable devices are enough.
func (t *requestTally) report(r requestSpec) RequestReport {
	rep := t.rep
	for _, k := range t.exhaustedOrder {
		cr := t.exhausted[k]
		slices.SortFunc(cr.Counters, inspect.CompareDeviceNames)
		slices.Sort(cr.HeldBy)
		rep.Counters = append(rep.Counters, *cr)
	}
	rep.InUseBy = sets.List(t.inUseBy)
	rep.Taints = sets.List(t.taints)
	switch r.mode {
	case resourceapi.DeviceAllocationModeAll:
		rep.Count = int64(rep.Matching)
		rep.Enough = rep.Matching > 0 && rep.Usable == rep.Matching
	default:
		rep.Enough = int64(rep.Usable) >= r.count
	}
	return rep
}

// matches evaluates selectors (all must match) on d, as the allocator does.
func (e *explainer) matches(d inspect.PoolDevice, selectors []resourceapi.DeviceSelector) (bool, error) {
	for _, s := range selectors {
		if s.CEL == nil {
			continue
		}
		expr := e.cache.GetOrCompile(s.CEL.Expression)
		if expr.Error != nil {
			return false, expr.Error
		}
		ok, _, err := expr.DeviceMatches(e.ctx, cel.Device{
			Driver: names.DriverName, AllowMultipleAllocations: d.Dev.AllowMultipleAllocations,
			Attributes: d.Dev.Attributes, Capacity: d.Dev.Capacity,
		})
		if err != nil {
			return false, cel.EnhanceRuntimeError(err)
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

func (e *explainer) capacityInUse(id structured.DeviceID) bool {
	if _, ok := e.state.AggregatedCapacity[id]; ok {
		return true
	}
	for s := range e.state.AllocatedSharedDeviceIDs {
		if s.GetDeviceID() == id {
			return true
		}
	}
	return false
}

// shortCounters lists the counters d consumes more of than is left.
func shortCounters(d inspect.PoolDevice, avail map[counterKey]resourceapi.Counter) []counterKey {
	var out []counterKey
	for _, cc := range d.Dev.ConsumesCounters {
		for _, name := range slices.Sorted(mapsKeys(cc.Counters)) {
			k := counterKey{d.Pool, cc.CounterSet, name}
			a, ok := avail[k]
			need := cc.Counters[name]
			if ok && a.Value.Cmp(need.Value) < 0 {
				out = append(out, k)
			}
		}
	}
	return out
}

// untolerated lists d's NoSchedule and NoExecute taints no toleration covers.
func untolerated(d *resourceapi.Device, tolerations []resourceapi.DeviceToleration) []string {
	var out []string
	for _, t := range d.Taints {
		if t.Effect != resourceapi.DeviceTaintEffectNoSchedule && t.Effect != resourceapi.DeviceTaintEffectNoExecute {
			continue
		}
		if !slices.ContainsFunc(tolerations, func(tol resourceapi.DeviceToleration) bool { return resourceclaim.ToleratesTaint(tol, t) }) {
			s := t.Key
			if t.Value != "" {
				s += "=" + t.Value
			}
			out = append(out, s+":"+string(t.Effect))
		}
	}
	return out
}

// capacityFits says whether what the request consumes of each capacity of
// the device still fits beside what its other shares consume, following
// the device's request policy (default, valid range or values).
func (e *explainer) capacityFits(id structured.DeviceID, d *resourceapi.Device, req *resourceapi.CapacityRequirements) bool {
	if req != nil {
		for name := range req.Requests {
			if _, ok := d.Capacity[name]; !ok {
				return false
			}
		}
	}
	used := e.state.AggregatedCapacity[id]
	for name, c := range d.Capacity {
		var want *resource.Quantity
		if req != nil {
			if q, ok := req.Requests[name]; ok {
				want = &q
			}
		}
		consumed, ok := consumedCapacity(want, c)
		if !ok {
			return false
		}
		if u, ok := used[name]; ok && u != nil {
			consumed.Add(*u)
		}
		if consumed.Cmp(c.Value) > 0 {
			return false
		}
	}
	return true
}

// markAllocated counts results in the allocator's state as in use: a
// whole device, or a share and the capacity it consumes.
func (e *explainer) markAllocated(results []resourceapi.DeviceRequestAllocationResult) {
	for _, r := range results {
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if r.ShareID != nil {
			e.state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
			e.state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
		} else {
			e.state.AllocatedDevices.Insert(id)
		}
	}
}
