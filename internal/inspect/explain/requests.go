package explain

import (
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/tessera-gpu/tessera/internal/inspect"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

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
		if strings.HasPrefix(k.counter, publish.ModeTokenPrefix) {
			cr.ModeConflict = true
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
