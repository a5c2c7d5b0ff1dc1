package explain

import (
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/tessera-gpu/tessera/internal/inspect"
	"github.com/tessera-gpu/tessera/internal/names"
)

// consumedCapacity is what a request consumes of capacity c, following
// its request policy as the allocator does; false when the request breaks
// the policy (above the range maximum, no valid value large enough).
func consumedCapacity(want *resource.Quantity, c resourceapi.DeviceCapacity) (resource.Quantity, bool) {
	p := c.RequestPolicy
	if want == nil {
		if p != nil && p.Default != nil {
			return p.Default.DeepCopy(), true
		}
		return c.Value.DeepCopy(), true
	}
	if p == nil {
		return want.DeepCopy(), true
	}
	switch {
	case p.ValidRange != nil && p.ValidRange.Min != nil:
		r := p.ValidRange
		got := want.DeepCopy()
		if got.Cmp(*r.Min) < 0 {
			got = r.Min.DeepCopy()
		} else if r.Step != nil && r.Step.Sign() > 0 {
			// min + ceil((want-min)/step)*step, in exact rational arithmetic.
			min, step, w := r.Min.AsDec(), r.Step.AsDec(), want.AsDec()
			minR, _ := new(big.Rat).SetString(min.String())
			stepR, _ := new(big.Rat).SetString(step.String())
			wR, _ := new(big.Rat).SetString(w.String())
			n := new(big.Rat).Quo(new(big.Rat).Sub(wR, minR), stepR)
			q := new(big.Int).Quo(n.Num(), n.Denom())
			if new(big.Rat).SetInt(q).Cmp(n) < 0 {
				q.Add(q, big.NewInt(1))
			}
			v := new(big.Rat).Add(minR, new(big.Rat).Mul(new(big.Rat).SetInt(q), stepR))
			parsed, err := resource.ParseQuantity(v.FloatString(3))
			if err == nil {
				got = parsed
			}
		}
		if r.Max != nil && got.Cmp(*r.Max) > 0 {
			return got, false
		}
		return got, true
	case len(p.ValidValues) > 0:
		for _, v := range p.ValidValues {
			if v.Cmp(*want) >= 0 {
				return v.DeepCopy(), true
			}
		}
		return want.DeepCopy(), false
	}
	return want.DeepCopy(), true
}

// lookupFQ finds attribute name (domain/id) on d as the allocator's
// constraints do: as given, or by its id when the domain is the driver's.
func lookupFQ(d *resourceapi.Device, name resourceapi.FullyQualifiedName) (resourceapi.DeviceAttribute, bool) {
	if a, ok := d.Attributes[resourceapi.QualifiedName(name)]; ok {
		return a, true
	}
	domain, id, ok := strings.Cut(string(name), "/")
	if !ok || domain != names.DriverName {
		return resourceapi.DeviceAttribute{}, false
	}
	a, ok := d.Attributes[resourceapi.QualifiedName(id)]
	return a, ok
}

func attrValue(a resourceapi.DeviceAttribute) string {
	switch {
	case a.StringValue != nil:
		return *a.StringValue
	case a.IntValue != nil:
		return strconv.FormatInt(*a.IntValue, 10)
	case a.BoolValue != nil:
		return strconv.FormatBool(*a.BoolValue)
	case a.VersionValue != nil:
		return *a.VersionValue
	}
	return "?"
}

// constraintCandidate is what one request covered by a constraint brings:
// how many devices it needs and which are usable.
type constraintCandidate struct {
	count  int64
	usable []inspect.PoolDevice
}

// constraintReports checks each constraint of c against the usable devices
// of the requests it covers (for a firstAvailable request, its first
// alternative with enough usable devices, else its first).
func constraintReports(c *resourceapi.ResourceClaim, reports []RequestReport) []ConstraintReport {
	key := claimKey(c)
	var out []ConstraintReport
	for _, con := range c.Spec.Devices.Constraints {
		cands := constraintCandidates(c, key, con, reports)
		var rep ConstraintReport
		switch {
		case con.MatchAttribute != nil:
			rep = matchAttributeReport(key, *con.MatchAttribute, cands)
		case con.DistinctAttribute != nil:
			rep = distinctAttributeReport(key, *con.DistinctAttribute, cands)
		default:
			continue
		}
		// With no usable device at all the constraint is not what stops
		// the claim: the requests' own reasons say why.
		rep.moot = !slices.ContainsFunc(cands, func(c constraintCandidate) bool { return len(c.usable) > 0 })
		out = append(out, rep)
	}
	return out
}

// constraintCandidates are, for each request of claim c (key) that con
// covers (all when it names none), what it needs and its usable devices.
func constraintCandidates(c *resourceapi.ResourceClaim, key string, con resourceapi.DeviceConstraint, reports []RequestReport) []constraintCandidate {
	names := sets.New(con.Requests...)
	var cands []constraintCandidate
	for _, r := range c.Spec.Devices.Requests {
		if r.Exactly != nil {
			if names.Len() == 0 || names.Has(r.Name) {
				if rep := requestReportOf(reports, key, r.Name); rep != nil {
					cands = append(cands, constraintCandidate{rep.Count, rep.usable})
				}
			}
			continue
		}
		if chosen := chosenAlternative(r, key, names, reports); chosen != nil {
			cands = append(cands, constraintCandidate{chosen.Count, chosen.usable})
		}
	}
	return cands
}

// chosenAlternative is the report of the alternative of firstAvailable
// request r the constraint covering names is checked on: the first with
// enough usable devices, else the first; nil when it covers none.
func chosenAlternative(r resourceapi.DeviceRequest, key string, names sets.Set[string], reports []RequestReport) *RequestReport {
	var chosen *RequestReport
	for _, s := range r.FirstAvailable {
		full := r.Name + "/" + s.Name
		if names.Len() > 0 && !names.Has(r.Name) && !names.Has(full) {
			continue
		}
		rep := requestReportOf(reports, key, full)
		if rep == nil {
			continue
		}
		if chosen == nil || (!chosen.Enough && rep.Enough) {
			chosen = rep
		}
	}
	return chosen
}

// requestReportOf is the report of claim key's request name, or nil.
func requestReportOf(reports []RequestReport, key, name string) *RequestReport {
	for i := range reports {
		if reports[i].Claim == key && reports[i].Request == name {
			return &reports[i]
		}
	}
	return nil
}

func shortAttr(name resourceapi.FullyQualifiedName) string {
	if _, id, ok := strings.Cut(string(name), "/"); ok {
		return id
	}
	return string(name)
}

func matchAttributeReport(claim string, attr resourceapi.FullyQualifiedName, cands []constraintCandidate) ConstraintReport {
	rep := ConstraintReport{Claim: claim, Kind: "matchAttribute", Attribute: string(attr)}
	g := groupByAttribute(attr, cands)
	best, bestN := "", -1
	for _, v := range slices.Sorted(mapsKeys(g.byValue)) {
		if g.fits(v, cands) {
			rep.Satisfiable = true
			rep.Message = fmt.Sprintf("matchAttribute %s: %s=%s has %d free matching devices, the claim needs %d", attr, shortAttr(attr), v, g.byValue[v].Len(), g.need)
			return rep
		}
		if g.byValue[v].Len() > bestN {
			best, bestN = v, g.byValue[v].Len()
		}
	}
	rep.Message = g.unmetMessage(attr, best, bestN)
	return rep
}

// attrGroups are the usable devices of a matchAttribute constraint's
// candidates by the attribute's value.
type attrGroups struct {
	need    int64                                  // devices the candidates need together
	byValue map[string]sets.Set[inspect.DeviceKey] // all candidates' devices
	perCand []map[string]int64                     // each candidate's device count
	lacking sets.Set[inspect.DeviceKey]            // devices without the attribute
}

func groupByAttribute(attr resourceapi.FullyQualifiedName, cands []constraintCandidate) attrGroups {
	g := attrGroups{
		byValue: map[string]sets.Set[inspect.DeviceKey]{},
		perCand: make([]map[string]int64, len(cands)),
		lacking: sets.New[inspect.DeviceKey](),
	}
	for i, c := range cands {
		g.need += c.count
		g.perCand[i] = map[string]int64{}
		for _, d := range c.usable {
			a, ok := lookupFQ(d.Dev, attr)
			if !ok {
				g.lacking.Insert(d.Key())
				continue
			}
			v := attrValue(a)
			if g.byValue[v] == nil {
				g.byValue[v] = sets.New[inspect.DeviceKey]()
			}
			g.byValue[v].Insert(d.Key())
			g.perCand[i][v]++
		}
	}
	return g
}

// fits says whether the devices with value v cover the candidates
// together and each candidate's count.
func (g attrGroups) fits(v string, cands []constraintCandidate) bool {
	ok := int64(g.byValue[v].Len()) >= g.need
	for i, c := range cands {
		if g.perCand[i][v] < c.count {
			ok = false
		}
	}
	return ok
}

// unmetMessage says why no value fits: the largest group (best, with
// bestN devices; bestN < 0 for none) against the need, and how many
// devices lack the attribute.
func (g attrGroups) unmetMessage(attr resourceapi.FullyQualifiedName, best string, bestN int) string {
	var msg string
	if bestN < 0 {
		msg = fmt.Sprintf("matchAttribute %s: no free matching device has a %s, the claim needs %d on one", attr, shortAttr(attr), g.need)
	} else {
		msg = fmt.Sprintf("matchAttribute %s: the largest group of free matching devices with one %s has %d (%s=%s), the claim needs %d",
			attr, shortAttr(attr), bestN, shortAttr(attr), best, g.need)
	}
	if g.lacking.Len() > 0 {
		msg += fmt.Sprintf("; %d free matching devices do not publish %s", g.lacking.Len(), shortAttr(attr))
	}
	return msg
}

func distinctAttributeReport(claim string, attr resourceapi.FullyQualifiedName, cands []constraintCandidate) ConstraintReport {
	rep := ConstraintReport{Claim: claim, Kind: "distinctAttribute", Attribute: string(attr)}
	var need int64
	values := sets.New[string]()
	for _, c := range cands {
		need += c.count
		for _, d := range c.usable {
			if a, ok := lookupFQ(d.Dev, attr); ok {
				values.Insert(attrValue(a))
			}
		}
	}
	rep.Satisfiable = int64(values.Len()) >= need
	rep.Message = fmt.Sprintf("distinctAttribute %s: the free matching devices have %d distinct values of %s, the claim needs %d", attr, values.Len(), shortAttr(attr), need)
	return rep
}

// funnel describes a request's way through the node's devices:
// "the class matches 8 of 8 devices, 8 match the selectors, 3 in use (by
// ns/a), 5 usable".
func funnel(r *RequestReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "class %s matches %d of the node's %d devices", r.Class, r.ClassMatched, r.NodeDevices)
	if len(r.Selectors) > 0 {
		fmt.Fprintf(&b, ", %d of them match the request's selectors", r.Matching)
	}
	var lost []string
	if r.InUse > 0 {
		lost = append(lost, fmt.Sprintf("%d in use (by %s)", r.InUse, list(r.InUseBy, 4)))
	}
	if r.CountersExhausted > 0 {
		lost = append(lost, fmt.Sprintf("%d blocked by exhausted shared counters", r.CountersExhausted))
	}
	if r.Tainted > 0 {
		lost = append(lost, fmt.Sprintf("%d tainted (%s) without a toleration", r.Tainted, list(r.Taints, 3)))
	}
	if r.CapacityShort > 0 {
		lost = append(lost, fmt.Sprintf("%d without enough capacity left", r.CapacityShort))
	}
	if len(lost) > 0 {
		fmt.Fprintf(&b, "; of those %s", strings.Join(lost, ", "))
	}
	fmt.Fprintf(&b, "; %d usable", r.Usable)
	return b.String()
}

// need says what the request needs: "16 devices", "all matching devices".
func (r *RequestReport) need() string {
	if r.AllocationMode == string(resourceapi.DeviceAllocationModeAll) {
		return "all matching devices"
	}
	if r.Count == 1 {
		return "1 device"
	}
	return fmt.Sprintf("%d devices", r.Count)
}

// list joins names, eliding after max.
func list(names []string, max int) string {
	if len(names) == 0 {
		return "no claim in the snapshot"
	}
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:max], ", "), len(names)-max)
}

// counterWords describes an exhausted counter set.
func counterWords(c CounterReport) string {
	held := "no claim holds them (withheld by the node)"
	if len(c.HeldBy) > 0 {
		held = "held by " + list(c.HeldBy, 6)
	}
	if c.ModeConflict {
		// The counters of a GPU whose partitions are a mode (AMD) are
		// tokens: short ones mean the GPU is taken in another mode.
		return fmt.Sprintf("GPU %s (pool %s) is taken in another compute partition mode, or whole, %s: its partitions of one mode exclude the whole GPU and every other mode's, "+
			"so %d device(s) of it wait until the GPU is idle and can change mode", c.CounterSet, c.Pool, held, c.Devices)
	}
	return fmt.Sprintf("counter set %s (pool %s): %s exhausted for %d device(s), %s", c.CounterSet, c.Pool, list(c.Counters, 4), c.Devices, held)
}

// reasons says why the claims do not fit on a node, from its reports.
func reasons(v *NodeVerdict) []string {
	var out []string
	if v.Error != "" {
		out = append(out, "the allocator stopped with an error: "+v.Error)
	}
	out = append(out, requestReasons(v)...)
	out = append(out, counterReasons(v.Requests)...)
	out = append(out, constraintReasons(v.Constraints)...)
	if len(out) == 0 {
		out = append(out, "each request has enough free matching devices and each constraint a candidate set on its own, "+
			"but the allocator finds no combination that meets all of them at once (requests competing for the same devices, or constraints that exclude each other)")
	}
	return out
}

// requestReasons says which requests, or firstAvailable requests with all
// their alternatives, have too few usable devices.
func requestReasons(v *NodeVerdict) []string {
	var out []string
	for i := 0; i < len(v.Requests); {
		r := &v.Requests[i]
		if r.Alternative == 0 {
			i++
			switch {
			case r.Problem != "":
				out = append(out, fmt.Sprintf("request %s: %s", r.Request, r.Problem))
			case !r.Enough:
				out = append(out, fmt.Sprintf("request %s needs %s, too few here: %s", requestLabel(v, r), r.need(), funnel(r)))
			}
			continue
		}
		var reason string
		reason, i = alternativesReason(v.Requests, i)
		if reason != "" {
			out = append(out, reason)
		}
	}
	return out
}

// alternativesReason reads the alternatives of the firstAvailable request
// starting at reqs[i]: it says why none has enough devices ("" when one
// has), and returns the index after them.
func alternativesReason(reqs []RequestReport, i int) (string, int) {
	r := &reqs[i]
	parent, _, _ := strings.Cut(r.Request, "/")
	j := i
	enough := false
	var alts []string
	// The first is always taken, so the caller moves on even from an
	// alternative whose name lacks its parent's prefix.
	for ; j < len(reqs) && (j == i || reqs[j].Alternative > 0 && reqs[j].Claim == r.Claim && strings.HasPrefix(reqs[j].Request, parent+"/")); j++ {
		a := &reqs[j]
		enough = enough || a.Enough
		if a.Problem != "" {
			alts = append(alts, fmt.Sprintf("%s: %s", a.Request, a.Problem))
		} else {
			alts = append(alts, fmt.Sprintf("%s needs %s: %s", a.Request, a.need(), funnel(a)))
		}
	}
	if enough {
		return "", j
	}
	return fmt.Sprintf("request %s: none of its %d alternatives has enough devices here (%s)", parent, len(alts), strings.Join(alts, "; ")), j
}

// counterReasons describes, once each, the exhausted counter sets of the
// requests without enough devices.
func counterReasons(reqs []RequestReport) []string {
	var out []string
	seen := sets.New[string]()
	for _, r := range reqs {
		if r.Enough {
			continue
		}
		for _, c := range r.Counters {
			if w := counterWords(c); !seen.Has(w) {
				seen.Insert(w)
				out = append(out, w)
			}
		}
	}
	return out
}

// constraintReasons are the messages of the constraints no usable devices
// meet, but for those that are moot.
func constraintReasons(cons []ConstraintReport) []string {
	var out []string
	for _, c := range cons {
		if !c.Satisfiable && !c.moot {
			out = append(out, c.Message)
		}
	}
	return out
}

// requestLabel is the request's name, with its claim when several claims
// are explained together.
func requestLabel(v *NodeVerdict, r *RequestReport) string {
	for _, o := range v.Requests {
		if o.Claim != r.Claim {
			return r.Claim + " " + r.Request
		}
	}
	return r.Request
}

// windowReason names the dynamic GPUs of n whose placements are not
// published (counter sets without a partition device: GPUs without
// partitions outside the agent's placement window), when a request (or
// firstAvailable alternative) of reqs asks the MIG class: a claim that
// needs more of them than are open waits for the agent to open more. ""
// when none applies.
func windowReason(n *inspect.NodeDevices, reqs []RequestReport) string {
	mig, xcp := "mig."+names.DriverName, "xcp."+names.DriverName
	if !slices.ContainsFunc(reqs, func(r RequestReport) bool { return r.Class == mig || r.Class == xcp }) {
		return ""
	}
	open := sets.New[inspect.DeviceKey]()
	for _, d := range n.Devices {
		if gpu, ok := names.ParentGPU(d.Dev.Name); ok && gpu != d.Dev.Name {
			open.Insert(inspect.DeviceKey{Pool: d.Pool, Name: gpu})
		}
	}
	var closed []string
	for k := range n.CounterSets {
		if _, ok := names.ParentGPU(k.Name); ok && !open.Has(k) {
			closed = append(closed, k.Name)
		}
	}
	if len(closed) == 0 {
		return ""
	}
	slices.SortFunc(closed, inspect.CompareDeviceNames)
	return fmt.Sprintf("the placements of %s are not published: GPUs without partitions outside the agent's placement window (--dynamic-window), "+
		"opened as the open GPUs fill (docs/partitioning.md#the-placement-window)", list(closed, 8))
}

// domainReason says why a node has no IMEX channel to offer a request of
// the IMEX class: it is in no multi-node NVLink domain (its GPUs publish
// none, so its agent sets no label and no domain's pool selects it), or no
// agent publishes its domain's channels.
func domainReason(n *inspect.NodeDevices, reqs []RequestReport) string {
	imex := "imex." + names.DriverName
	if !slices.ContainsFunc(reqs, func(r RequestReport) bool { return r.Class == imex && r.ClassMatched == 0 }) {
		return ""
	}
	if d := n.Labels()[names.NodeLabelFabricDomain]; d != "" {
		return fmt.Sprintf("the node is in multi-node NVLink domain %s, whose IMEX channels no agent publishes (imex.channels, --imex-channels; docs/rack.md)", d)
	}
	return "the node is in no multi-node NVLink domain: IMEX channels are offered only to the trays of one (docs/rack.md)"
}
