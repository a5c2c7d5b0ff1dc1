package explain

import (
	"context"
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/tessera-gpu/tessera/internal/channelpool"
	"github.com/tessera-gpu/tessera/internal/inspect"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// GangExplanation explains a PodGroup (the Workload API's gang): whether
// its members' claims fit together, and if not, which member is the
// first that fits nowhere once the ones before it hold their devices, and
// why, node by node (docs/kubectl-tessera.md, "A pending gang").
//
// The members are placed one at a time in name order (worker-2 before worker-10), each on the first
// node (in the report's node order) where the scheduler's allocator
// allocates its claims, with every claim placed so far holding its
// devices; a claim the group shares (a pod-group claim) is allocated once,
// with its first member, and ties the others to its node. That is one
// placement the allocator finds, not the scheduler's: the scheduler
// scores nodes and tries more than one placement of a group, so a gang
// reported as not fitting this way can still fit (a different order
// would pack it), never the other way round.
type GangExplanation struct {
	// Group is namespace/name of the PodGroup.
	Group    string `json:"group"`
	MinCount int32  `json:"minCount,omitempty"`
	// Members are the group's pods, in the order they were placed.
	Members []string `json:"members"`
	Placed  []Member `json:"placed,omitempty"`
	// Fits: every member was placed and at least MinCount exist.
	Fits  bool     `json:"fits"`
	Notes []string `json:"notes,omitempty"`
	// Stuck is the explanation of the first member that fits on no node,
	// with the members before it holding their devices.
	Stuck *Explanation `json:"stuck,omitempty"`
}

// Member is one placed member: its node and what its claims got there.
type Member struct {
	Pod  string `json:"pod"`
	Node string `json:"node"`
	// Allocated: its claims were allocated already (the member is
	// scheduled), not placed by this explanation.
	Allocated bool   `json:"allocated,omitempty"`
	Devices   []Pick `json:"devices,omitempty"`
}

// groupOf is the PodGroup a pod belongs to, "" for none.
func groupOf(p *v1.Pod) string {
	if p.Spec.SchedulingGroup == nil || p.Spec.SchedulingGroup.PodGroupName == nil {
		return ""
	}
	return *p.Spec.SchedulingGroup.PodGroupName
}

// RunGang explains the PodGroup group in namespace: in holds it, its
// pods, and the templates they name.
func RunGang(ctx context.Context, in *Input, namespace, group string) (*GangExplanation, error) {
	pg := in.podGroup(namespace, group)
	if pg == nil {
		return nil, fmt.Errorf("PodGroup %s/%s not found", namespace, group)
	}
	gx := &GangExplanation{Group: pg.Namespace + "/" + pg.Name}
	if g := pg.Spec.SchedulingPolicy.Gang; g != nil {
		gx.MinCount = g.MinCount
	}
	members, explained, err := in.gangMembers(pg.Namespace, group)
	if err != nil {
		return nil, err
	}
	if len(members) == 0 {
		return nil, fmt.Errorf("PodGroup %s has no pods", gx.Group)
	}
	for _, m := range members {
		gx.Members = append(gx.Members, m.pod)
	}
	if n := int32(len(members)); n < gx.MinCount {
		gx.Notes = append(gx.Notes, fmt.Sprintf("only %d of the gang's minCount %d pods exist: the scheduler waits for the rest", n, gx.MinCount))
	}
	if in.ShippedClasses {
		gx.Notes = append(gx.Notes, "DeviceClasses: none in the input, using the ones shipped with Tessera")
	}

	e := newExplainer(ctx, in)
	e.holdAllocated(in.Snapshot.Claims, explained)
	nodes := inspect.NodesOf(in.Snapshot)
	placedOn := allocatedOn(nodes, in.Snapshot.Claims)
	for k, m := range members {
		pending, tied := m.pending(placedOn)
		if len(pending) == 0 {
			gx.Placed = append(gx.Placed, Member{Pod: m.pod, Node: tied.node, Allocated: true})
			continue
		}
		alloc, err := structured.NewAllocator(ctx, Features, e.state, e.classes, namedSlices(in.Snapshot.Slices), e.cache)
		if err != nil {
			return nil, err
		}
		if placed := e.place(ctx, alloc, nodes, m.pod, pending, tied, placedOn); placed != nil {
			gx.Placed = append(gx.Placed, *placed)
			continue
		}
		gx.Stuck = e.stuck(alloc, nodes, m.pod, pending, tied)
		gx.Notes = append(gx.Notes, fmt.Sprintf("member %d of %d fits on no node once the %d before it hold their devices: the scheduler places none of the gang", k+1, len(members), k))
		return gx, nil
	}
	gx.Fits = int32(len(members)) >= gx.MinCount
	return gx, nil
}

// gangMember is one pod of a gang and its claims.
type gangMember struct {
	pod    string
	claims []*resourceapi.ResourceClaim
}

// gangMembers are the pods of group in namespace, in name order, and the
// keys of their claims not yet allocated (the ones to explain).
func (in *Input) gangMembers(namespace, group string) ([]gangMember, sets.Set[string], error) {
	var members []gangMember
	explained := sets.New[string]()
	for i := range in.Pods {
		p := &in.Pods[i]
		if groupOf(p) != group || (p.Namespace != "" && p.Namespace != namespace) {
			continue
		}
		claims, err := in.podClaims(namespace, p.Name)
		if err != nil {
			return nil, nil, err
		}
		members = append(members, gangMember{p.Name, claims})
		for _, c := range claims {
			if c.Status.Allocation == nil {
				explained.Insert(claimKey(c))
			}
		}
	}
	slices.SortFunc(members, func(a, b gangMember) int { return inspect.CompareDeviceNames(a.pod, b.pod) })
	return members, explained, nil
}

// A tie is where a member's placed claim, which the group shares, keeps
// the members after it: the node of its devices, or, for an IMEX channel
// (a device of a multi-node NVLink domain's pool, whose slices select the
// domain's nodes), any node of that domain.
type tie struct{ node, domain string }

func (t tie) set() bool { return t.node != "" || t.domain != "" }

// allows reports whether a member tied by t may be placed on n.
func (t tie) allows(n *inspect.NodeDevices) bool {
	return (t.node == "" || n.Name == t.node) && (t.domain == "" || n.Labels()[names.NodeLabelFabricDomain] == t.domain)
}

func (t tie) String() string {
	if t.domain != "" {
		return "the nodes of multi-node NVLink domain " + t.domain
	}
	return "node " + t.node
}

// tieOf is where results keep the group's members ("" tie for none).
func tieOf(nodes []*inspect.NodeDevices, results []resourceapi.DeviceRequestAllocationResult) tie {
	for _, r := range results {
		if d, ok := channelpool.DomainOf(r.Pool); ok {
			return tie{domain: d}
		}
	}
	return tie{node: nodeOfResults(nodes, results)}
}

// allocatedOn is the tie of each allocated claim, by claim key.
func allocatedOn(nodes []*inspect.NodeDevices, claims []resourceapi.ResourceClaim) map[string]tie {
	placedOn := map[string]tie{}
	for _, c := range claims {
		if c.Status.Allocation != nil {
			if t := tieOf(nodes, c.Status.Allocation.Devices.Results); t.set() {
				placedOn[claimKey(&c)] = t
			}
		}
	}
	return placedOn
}

// pending are m's claims still to place, and where its claims already
// placed tie it (none set when none).
func (m gangMember) pending(placedOn map[string]tie) (pending []*resourceapi.ResourceClaim, tied tie) {
	for _, c := range m.claims {
		if t, ok := placedOn[claimKey(c)]; ok {
			if t.node != "" {
				tied.node = t.node
			}
			if t.domain != "" {
				tied.domain = t.domain
			}
			continue
		}
		pending = append(pending, pendingCopy(c))
	}
	return pending, tied
}

// place allocates pod's pending claims on the first node that takes them
// (tied's alone when set), holding their devices for the members after it
// and recording where they went; nil when no node takes them.
func (e *explainer) place(ctx context.Context, alloc structured.Allocator, nodes []*inspect.NodeDevices, pod string, pending []*resourceapi.ResourceClaim, tied tie, placedOn map[string]tie) *Member {
	for _, n := range nodes {
		if !tied.allows(n) {
			continue
		}
		res, err := alloc.Allocate(ctx, n.Node(), pending)
		if err != nil || res == nil {
			continue
		}
		for i, c := range pending {
			placedOn[claimKey(c)] = tie{node: n.Name}
			if t := tieOf(nodes, res[i].Devices.Results); t.domain != "" {
				placedOn[claimKey(c)] = t
			}
			e.hold(claimKey(c), pod, res[i].Devices.Results)
		}
		return &Member{Pod: pod, Node: n.Name, Devices: picks(res, pending)}
	}
	return nil
}

// stuck explains the first member that fits nowhere: each node's verdict
// for it, with the members before it holding their devices.
func (e *explainer) stuck(alloc structured.Allocator, nodes []*inspect.NodeDevices, pod string, pending []*resourceapi.ResourceClaim, tied tie) *Explanation {
	ex := &Explanation{Pod: pod}
	for _, c := range pending {
		ex.Claims = append(ex.Claims, claimKey(c))
	}
	if tied.set() {
		ex.Notes = append(ex.Notes, "its group's shared claim ties it to "+tied.String())
	}
	if tied.domain != "" {
		ex.Notes = append(ex.Notes, e.domainGPUs(nodes, tied.domain))
	}
	for _, n := range nodes {
		if !tied.allows(n) {
			continue
		}
		ex.Nodes = append(ex.Nodes, e.verdict(alloc, n, pending))
	}
	sortVerdicts(ex.Nodes)
	return ex
}

// hold records results (of claim, placed for pod by the explanation) as
// allocated, as holdAllocated does for the snapshot's claims.
func (e *explainer) hold(claim, pod string, results []resourceapi.DeviceRequestAllocationResult) {
	e.markAllocated(results)
	for _, r := range results {
		k := inspect.DeviceKey{Pool: r.Pool, Name: r.Device}
		e.holders[k] = append(e.holders[k], inspect.Holder{Claim: claim, Request: r.Request, Pods: []string{pod + " (gang member, placed by explain)"}})
	}
}

// nodeOfResults is the node whose devices results name, "" for none.
func nodeOfResults(nodes []*inspect.NodeDevices, results []resourceapi.DeviceRequestAllocationResult) string {
	for _, r := range results {
		for _, n := range nodes {
			if slices.ContainsFunc(n.Devices, func(d inspect.PoolDevice) bool { return d.Pool == r.Pool && d.Dev.Name == r.Device }) {
				return n.Name
			}
		}
	}
	return ""
}

// podGroup is the PodGroup of that name in in ("" namespace: any).
func (in *Input) podGroup(namespace, name string) *schedulingapi.PodGroup {
	for i := range in.PodGroups {
		g := &in.PodGroups[i]
		if g.Name == name && (namespace == "" || g.Namespace == "" || g.Namespace == namespace) {
			return g
		}
	}
	return nil
}

// podGroupName reports whether target is podgroup/NAME.
func podGroupName(target string) (string, bool) {
	kind, name, ok := strings.Cut(target, "/")
	if !ok {
		return "", false
	}
	switch strings.ToLower(kind) {
	case "podgroup", "podgroups", "podgroup.scheduling.k8s.io":
		return name, true
	}
	return "", false
}

// GangTarget is the PodGroup target explains as a gang: podgroup/NAME, or
// a pod of a PodGroup; "" for anything else.
func (in *Input) GangTarget(namespace, target string) string {
	if g, ok := podGroupName(target); ok {
		return g
	}
	p, ok := podName(target)
	if !ok {
		return ""
	}
	for i := range in.Pods {
		if in.Pods[i].Name == p && (namespace == "" || in.Pods[i].Namespace == "" || in.Pods[i].Namespace == namespace) {
			return groupOf(&in.Pods[i])
		}
	}
	return ""
}

// domainGPUs says how many whole GPUs of domain's nodes are free once the
// members placed so far hold theirs: the group's channel keeps every
// member to that domain, so a member that needs more waits though GPUs
// are free elsewhere.
func (e *explainer) domainGPUs(nodes []*inspect.NodeDevices, domain string) string {
	var trays, gpus, free int
	for _, n := range nodes {
		if n.Labels()[names.NodeLabelFabricDomain] != domain {
			continue
		}
		trays++
		for _, d := range n.Devices {
			if inspect.AttrString(d.Dev, publish.AttrType) != publish.TypeGPU {
				continue
			}
			gpus++
			if !e.state.AllocatedDevices.Has(structured.MakeDeviceID(names.DriverName, d.Pool, d.Dev.Name)) {
				free++
			}
		}
	}
	return fmt.Sprintf("domain %s has %d of its %d whole GPUs free on its %d nodes, with the members before it holding theirs", domain, free, gpus, trays)
}
