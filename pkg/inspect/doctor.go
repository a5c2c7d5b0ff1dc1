package inspect

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/pkg/publish"
)

// `kubectl tessera doctor` is the troubleshooting table as checks. The
// checks are pure functions of a DoctorInput (doctor_gather.go fills one
// from a cluster), so that each can be tested without one.

// Status is a check's verdict.
type Status string

// Verdicts, in increasing severity.
const (
	StatusPass Status = "PASS"
	StatusWarn Status = "WARN"
	StatusFail Status = "FAIL"
)

// Check names (the part after "NODE/").
const (
	CheckDeviceClasses = "deviceclasses"
	CheckSlices        = "slices"
	CheckNode          = "node"
	CheckReadyz        = "readyz"
	CheckHealth        = "health"
	CheckPrepare       = "prepare"
	CheckPartitioning  = "partitioning"
)

// ShippedDeviceClasses are the DeviceClasses of deployments/deviceclasses
// (and of the chart), which claims name.
var ShippedDeviceClasses = []string{
	"gpu.tessera.dev",
	"nvidia.gpu.tessera.dev",
	"amd.gpu.tessera.dev",
	"mig.gpu.tessera.dev",
	"xcp.gpu.tessera.dev",
}

// PartitioningLabel is the node label the local cluster sets to the
// agent's --partitioning (static or dynamic). Real clusters may not set it.
const PartitioningLabel = "tessera.dev/partitioning"

// ConditionPrepared is the condition the agent writes on a claim's
// status.devices[] entry when preparing it fails (Status False) and on the
// first success after a failure (pkg/driver/claimstatus.go).
const ConditionPrepared = "Prepared"

// ReasonFailedPrepare is the reason of the kubelet's pod events when a
// driver fails to prepare a pod's claims.
const ReasonFailedPrepare = "FailedPrepareDynamicResources"

// EventWindow is how far back FailedPrepareDynamicResources events count
// (the output says "the last hour").
const EventWindow = time.Hour

// maxMessage bounds a quoted condition or event message.
const maxMessage = 200

// maxListed bounds the findings of one kind per node (stuck claims, pods
// with failed-prepare events); the rest are counted in one more line.
const maxListed = 10

// ReadyState is the outcome of asking an agent's /readyz.
type ReadyState int

// Readiness outcomes.
const (
	// ReadyUnknown: not asked (no address known) or the asking failed for
	// a reason that says nothing about the agent (e.g. not allowed).
	ReadyUnknown ReadyState = iota
	// ReadyOK: /readyz answered 200.
	ReadyOK
	// ReadyFailed: /readyz answered otherwise, or the agent did not answer.
	ReadyFailed
)

// Readiness is what a node's agent said on /readyz.
type Readiness struct {
	State ReadyState
	// Via is what was asked: "pod NS/NAME port P via the API server" or
	// the URL.
	Via string
	// Detail is the answer (trimmed), the error, or why it was not asked.
	Detail string
}

// DoctorInput is everything the checks look at. Lists hold what was read;
// the *Err fields say why a list could not be read (its checks then warn
// instead of judging).
type DoctorInput struct {
	// Nodes are the nodes named on the command line; empty means every
	// node that has slices of the driver.
	Nodes []string
	// NodeObjects are the Node objects read (those named, or all).
	NodeObjects []corev1.Node
	NodesErr    string
	// Slices are the driver's ResourceSlices (other drivers' are ignored).
	Slices  []resourceapi.ResourceSlice
	Classes []resourceapi.DeviceClass
	// ClassesErr: the DeviceClasses could not be listed.
	ClassesErr string
	Claims     []resourceapi.ResourceClaim
	ClaimsErr  string
	// Events are pod events of reason FailedPrepareDynamicResources
	// (others are ignored).
	Events    []corev1.Event
	EventsErr string
	// PodNodes maps "namespace/name" of pods named by Events to their
	// node, for events that do not say which kubelet sent them.
	PodNodes map[string]string
	// Readiness is each node's /readyz outcome; a node without an entry
	// was not asked.
	Readiness map[string]Readiness
	// Now is when the input was read; zero means time.Now().
	Now time.Time
}

// Finding is one line of the doctor's output.
type Finding struct {
	Status Status `json:"status"`
	// Check is one of the Check* names.
	Check string `json:"check"`
	// Node is the node checked, empty for fleet-wide checks.
	Node   string `json:"node,omitempty"`
	Detail string `json:"detail"`
	// Fix says what to do; empty on PASS.
	Fix string `json:"fix,omitempty"`
}

// Name is the check as printed: "deviceclasses" or "NODE/slices".
func (f Finding) Name() string {
	if f.Node == "" {
		return f.Check
	}
	return f.Node + "/" + f.Check
}

// nodeOfSlice is the node a slice belongs to: spec.nodeName, or else its
// pool's name (Tessera names a node's pool after the node).
func nodeOfSlice(s *resourceapi.ResourceSlice) string {
	if s.Spec.NodeName != nil && *s.Spec.NodeName != "" {
		return *s.Spec.NodeName
	}
	return s.Spec.Pool.Name
}

// driverSlices returns the slices of DriverName grouped by node.
func (in *DoctorInput) driverSlices() map[string][]resourceapi.ResourceSlice {
	out := map[string][]resourceapi.ResourceSlice{}
	for i := range in.Slices {
		s := &in.Slices[i]
		if s.Spec.Driver != DriverName {
			continue
		}
		n := nodeOfSlice(s)
		out[n] = append(out[n], *s)
	}
	return out
}

// TargetNodes are the nodes checked one by one: those named, or else every
// node with slices of the driver, sorted.
func (in *DoctorInput) TargetNodes() []string {
	if len(in.Nodes) > 0 {
		var out []string
		for _, n := range in.Nodes {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
		return out
	}
	var out []string
	for n := range in.driverSlices() {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (in *DoctorInput) now() time.Time {
	if in.Now.IsZero() {
		return time.Now()
	}
	return in.Now
}

// RunDoctor runs every check: the fleet-wide ones once, then each node's.
func RunDoctor(in *DoctorInput) []Finding {
	var out []Finding
	out = append(out, checkDeviceClasses(in))
	bySlice := in.driverSlices()
	targets := in.TargetNodes()
	if len(targets) == 0 {
		out = append(out, Finding{Status: StatusFail, Check: CheckSlices,
			Detail: fmt.Sprintf("no ResourceSlices of driver %s in the cluster: no agent is running or registered", DriverName),
			Fix:    "install the chart (deployments/helm/tessera) or start tessera-kubelet-plugin on the GPU nodes, then check its log"})
	}
	nodes := map[string]*corev1.Node{}
	for i := range in.NodeObjects {
		nodes[in.NodeObjects[i].Name] = &in.NodeObjects[i]
	}
	events, unplaced := in.prepareEvents()
	for _, name := range targets {
		sl := bySlice[name]
		node := nodes[name]
		out = append(out, checkNode(in, name, node, len(sl)))
		slicesFs := checkSlices(name, sl)
		out = append(out, slicesFs...)
		// A node that does not exist has no agent to ask; a node without
		// slices has no devices to judge.
		if node != nil || in.NodesErr != "" {
			out = append(out, checkReadyz(in, name))
		}
		nd := nodeDevicesOf(name, sl)
		if len(sl) > 0 {
			out = append(out, checkHealth(name, nd)...)
		}
		out = append(out, checkPrepare(in, name, sl, events[name])...)
		if len(sl) > 0 {
			incomplete := slices.ContainsFunc(slicesFs, func(f Finding) bool { return f.Status == StatusFail })
			out = append(out, checkPartitioning(name, node, nd, incomplete))
		}
	}
	if len(unplaced) > 0 {
		out = append(out, eventFindings("", unplaced)...)
	}
	return out
}

// 1. DeviceClasses.

func checkDeviceClasses(in *DoctorInput) Finding {
	f := Finding{Check: CheckDeviceClasses}
	if in.ClassesErr != "" {
		f.Status, f.Detail = StatusWarn, "could not list DeviceClasses: "+in.ClassesErr
		f.Fix = "run as a user allowed to list deviceclasses.resource.k8s.io"
		return f
	}
	have := map[string]bool{}
	for _, c := range in.Classes {
		have[c.Name] = true
	}
	var missing []string
	for _, c := range ShippedDeviceClasses {
		if !have[c] {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		f.Status = StatusFail
		f.Detail = fmt.Sprintf("missing %d of %d DeviceClasses: %s (claims naming them stay pending)", len(missing), len(ShippedDeviceClasses), strings.Join(missing, ", "))
		f.Fix = "install the chart (deployments/helm/tessera) or kubectl apply -f deployments/deviceclasses/deviceclasses.yaml"
		return f
	}
	f.Status = StatusPass
	f.Detail = fmt.Sprintf("all %d installed: %s", len(ShippedDeviceClasses), strings.Join(ShippedDeviceClasses, ", "))
	return f
}

// 2. The node's pool is published, completely, without leftovers.

func checkSlices(node string, sl []resourceapi.ResourceSlice) []Finding {
	if len(sl) == 0 {
		return []Finding{{Status: StatusFail, Check: CheckSlices, Node: node,
			Detail: fmt.Sprintf("no ResourceSlices: the agent is not running or not registered on %s", node),
			Fix:    fmt.Sprintf("check the agent pod (or process) on %s and its log: it publishes the slices once it starts", node)}}
	}
	type pool struct {
		newest     int64
		want       int64 // resourceSliceCount of the newest generation
		have       int   // slices of the newest generation
		devices    int
		older      int // slices of older generations
		olderGens  []int64
		countsDiff bool // the newest generation's slices disagree on the count
	}
	pools := map[string]*pool{}
	for i := range sl {
		p := sl[i].Spec.Pool
		pl := pools[p.Name]
		if pl == nil {
			pl = &pool{newest: p.Generation}
			pools[p.Name] = pl
		}
		pl.newest = max(pl.newest, p.Generation)
	}
	for i := range sl {
		p := sl[i].Spec.Pool
		pl := pools[p.Name]
		if p.Generation != pl.newest {
			pl.older++
			if !slices.Contains(pl.olderGens, p.Generation) {
				pl.olderGens = append(pl.olderGens, p.Generation)
			}
			continue
		}
		if pl.have > 0 && pl.want != p.ResourceSliceCount {
			pl.countsDiff = true
		}
		pl.want = max(pl.want, p.ResourceSliceCount)
		pl.have++
		pl.devices += len(sl[i].Spec.Devices)
	}
	names := make([]string, 0, len(pools))
	for n := range pools {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []Finding
	for _, name := range names {
		pl := pools[name]
		ok := true
		if int64(pl.have) < pl.want {
			ok = false
			out = append(out, Finding{Status: StatusFail, Check: CheckSlices, Node: node,
				Detail: fmt.Sprintf("pool %s generation %d: %d of %d slices published (resourceSliceCount %d): the scheduler ignores an incomplete pool", name, pl.newest, pl.have, pl.want, pl.want),
				Fix:    fmt.Sprintf("the agent on %s is still publishing or failed to: check its log (/readyz is not ready until every slice is published)", node)})
		} else if int64(pl.have) > pl.want || pl.countsDiff {
			ok = false
			out = append(out, Finding{Status: StatusWarn, Check: CheckSlices, Node: node,
				Detail: fmt.Sprintf("pool %s generation %d: %d slices, but resourceSliceCount says %d", name, pl.newest, pl.have, pl.want),
				Fix:    fmt.Sprintf("restart the agent on %s so it republishes its pool; check that only one agent runs there", node)})
		}
		if pl.older > 0 {
			ok = false
			slices.Sort(pl.olderGens)
			var gens []string
			for _, g := range pl.olderGens {
				gens = append(gens, fmt.Sprint(g))
			}
			out = append(out, Finding{Status: StatusWarn, Check: CheckSlices, Node: node,
				Detail: fmt.Sprintf("pool %s: %d slices of older generation %s left over beside generation %d", name, pl.older, strings.Join(gens, ","), pl.newest),
				Fix:    fmt.Sprintf("the agent deletes them once generation %d is complete; if they stay, restart the agent on %s or delete them", pl.newest, node)})
		}
		if ok {
			out = append(out, Finding{Status: StatusPass, Check: CheckSlices, Node: node,
				Detail: fmt.Sprintf("pool %s generation %d: %d of %d slices published, %d devices", name, pl.newest, pl.have, pl.want, pl.devices)})
		}
	}
	return out
}

// 3. The node exists and is Ready.

func checkNode(in *DoctorInput, name string, node *corev1.Node, nslices int) Finding {
	f := Finding{Check: CheckNode, Node: name}
	if node == nil {
		if in.NodesErr != "" {
			f.Status, f.Detail = StatusWarn, "could not read the Node: "+in.NodesErr
			f.Fix = "run as a user allowed to get/list nodes"
			return f
		}
		f.Status = StatusFail
		if nslices > 0 {
			f.Detail = fmt.Sprintf("node %s does not exist but %d ResourceSlices name it (stale slices)", name, nslices)
			f.Fix = fmt.Sprintf("kubectl delete resourceslices --field-selector spec.driver=%s,spec.nodeName=%s (the agent cleans up its own when it runs)", DriverName, name)
		} else {
			f.Detail = fmt.Sprintf("node %s does not exist", name)
			f.Fix = "check the node name: kubectl get nodes"
		}
		return f
	}
	var ready *corev1.NodeCondition
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			ready = &node.Status.Conditions[i]
		}
	}
	switch {
	case ready == nil:
		f.Status, f.Detail = StatusFail, "the node has no Ready condition: its kubelet never reported"
		f.Fix = fmt.Sprintf("kubectl describe node %s; check the kubelet on it", name)
	case ready.Status != corev1.ConditionTrue:
		f.Status = StatusFail
		f.Detail = fmt.Sprintf("NotReady (Ready=%s", ready.Status)
		if ready.Reason != "" {
			f.Detail += ", " + ready.Reason
		}
		f.Detail += ")"
		if ready.Message != "" {
			f.Detail += ": " + truncateMessage(ready.Message, maxMessage)
		}
		f.Fix = fmt.Sprintf("kubectl describe node %s; the kubelet must run to prepare claims", name)
	case node.Spec.Unschedulable:
		f.Status, f.Detail = StatusWarn, "Ready but cordoned (spec.unschedulable): no new pods land here"
		f.Fix = fmt.Sprintf("kubectl uncordon %s when its maintenance is done", name)
	default:
		f.Status, f.Detail = StatusPass, "Ready"
		if v := node.Status.NodeInfo.KubeletVersion; v != "" {
			f.Detail += ", kubelet " + v
		}
	}
	return f
}

// 4. The agent's /readyz.

func checkReadyz(in *DoctorInput, node string) Finding {
	f := Finding{Check: CheckReadyz, Node: node}
	r, ok := in.Readiness[node]
	if !ok {
		f.Status, f.Detail = StatusWarn, "not checked"
		f.Fix = "give the agent's address with --metrics-url " + node + "=http://HOST:9478/metrics"
		return f
	}
	via := ""
	if r.Via != "" {
		via = " (" + r.Via + ")"
	}
	switch r.State {
	case ReadyOK:
		f.Status, f.Detail = StatusPass, "ready"+via
	case ReadyFailed:
		f.Status, f.Detail = StatusFail, "not ready"+via+": "+truncateMessage(r.Detail, maxMessage)
		f.Fix = fmt.Sprintf("the agent on %s is ready once registered with the kubelet and every slice is published: check its log (kubectl logs on its pod)", node)
	default:
		f.Status, f.Detail = StatusWarn, r.Detail+via
		f.Fix = "give the agent's address with --metrics-url " + node + "=http://HOST:9478/metrics"
	}
	return f
}

// 5. Device taints.

// nodeDevicesOf is the node's newest-generation devices.
func nodeDevicesOf(node string, sl []resourceapi.ResourceSlice) *NodeDevices {
	for _, nd := range NodesOf(&Snapshot{Slices: sl}) {
		if nd.Name == node {
			return nd
		}
	}
	return &NodeDevices{Name: node, CounterSets: map[DeviceKey]resourceapi.CounterSet{}}
}

func checkHealth(node string, nd *NodeDevices) []Finding {
	var out []Finding
	groups := nd.GPUGroups()
	for _, g := range groups {
		var ts []Taint
		var on []string
		if g.Whole != nil {
			ts = TaintsOf(g.Whole)
			if len(ts) > 0 {
				on = append(on, g.Whole.Name)
			}
		}
		tainted := 0
		for _, p := range g.Partitions {
			pt := TaintsOf(p.Dev)
			if len(pt) > 0 {
				tainted++
			}
			ts = MergeTaints(ts, pt)
		}
		if len(ts) == 0 {
			continue
		}
		var parts []string
		for _, t := range ts {
			parts = append(parts, t.String())
		}
		where := ""
		if tainted > 0 {
			where = fmt.Sprintf(" (on %d of its %d partitions too)", tainted, len(g.Partitions))
			if len(on) == 0 {
				where = fmt.Sprintf(" (on %d of its %d partitions)", tainted, len(g.Partitions))
			}
		}
		out = append(out, Finding{Status: StatusWarn, Check: CheckHealth, Node: node,
			Detail: fmt.Sprintf("%s tainted: %s%s", g.Name, strings.Join(parts, ", "), where),
			Fix:    "see README Health (what each taint means and when it clears); `tessera-sim inject --clear` on simulated nodes"})
	}
	if len(out) == 0 {
		out = append(out, Finding{Status: StatusPass, Check: CheckHealth, Node: node,
			Detail: fmt.Sprintf("no device taints on %d GPUs (%d devices)", len(groups), len(nd.Devices))})
	}
	return out
}

// 6. Claims stuck in prepare.

func checkPrepare(in *DoctorInput, node string, sl []resourceapi.ResourceSlice, events []corev1.Event) []Finding {
	pools := map[string]bool{node: true}
	for i := range sl {
		pools[sl[i].Spec.Pool.Name] = true
	}
	var out []Finding
	var stuck []Finding
	for i := range in.Claims {
		c := &in.Claims[i]
		if c.Status.Allocation == nil {
			continue
		}
		var devs []string
		msg := ""
		for _, ds := range c.Status.Devices {
			if ds.Driver != DriverName || !pools[ds.Pool] {
				continue
			}
			for _, cond := range ds.Conditions {
				if cond.Type != ConditionPrepared || cond.Status != metav1.ConditionFalse {
					continue
				}
				if !slices.Contains(devs, ds.Device) {
					devs = append(devs, ds.Device)
				}
				if msg == "" {
					msg = cond.Message
					if cond.Reason != "" {
						msg = cond.Reason + ": " + msg
					}
				}
			}
		}
		if len(devs) == 0 {
			continue
		}
		stuck = append(stuck, Finding{Status: StatusFail, Check: CheckPrepare, Node: node,
			Detail: fmt.Sprintf("claim %s/%s: Prepared=False on %s: %s", c.Namespace, c.Name, strings.Join(devs, ","), truncateMessage(msg, maxMessage)),
			Fix:    fmt.Sprintf("kubectl describe resourceclaim -n %s %s; the agent's log on %s; the kubelet retries prepare while the pod waits", c.Namespace, c.Name, node)})
	}
	sort.SliceStable(stuck, func(a, b int) bool { return stuck[a].Detail < stuck[b].Detail })
	out = append(out, capFindings(stuck, StatusFail, CheckPrepare, node, "claims with Prepared=False")...)
	if in.ClaimsErr != "" {
		out = append(out, Finding{Status: StatusWarn, Check: CheckPrepare, Node: node,
			Detail: "could not list ResourceClaims: " + in.ClaimsErr,
			Fix:    "run as a user allowed to list resourceclaims in all namespaces"})
	}
	out = append(out, eventFindings(node, events)...)
	if in.EventsErr != "" {
		out = append(out, Finding{Status: StatusWarn, Check: CheckPrepare, Node: node,
			Detail: "could not list events: " + in.EventsErr,
			Fix:    "run as a user allowed to list events in all namespaces"})
	}
	if len(out) == 0 {
		out = append(out, Finding{Status: StatusPass, Check: CheckPrepare, Node: node,
			Detail: fmt.Sprintf("no claim with %s=False; no %s events in the last hour", ConditionPrepared, ReasonFailedPrepare)})
	}
	return out
}

// prepareEvents returns the recent failed-prepare pod events by node, and
// those whose node is unknown.
func (in *DoctorInput) prepareEvents() (map[string][]corev1.Event, []corev1.Event) {
	since := in.now().Add(-EventWindow)
	byNode := map[string][]corev1.Event{}
	var unplaced []corev1.Event
	for _, e := range in.Events {
		if e.Reason != ReasonFailedPrepare || e.InvolvedObject.Kind != "Pod" || eventTime(&e).Before(since) {
			continue
		}
		node := e.Source.Host
		if node == "" && e.ReportingController == "kubelet" {
			node = e.ReportingInstance
		}
		if node == "" {
			node = in.PodNodes[e.InvolvedObject.Namespace+"/"+e.InvolvedObject.Name]
		}
		if node == "" {
			unplaced = append(unplaced, e)
			continue
		}
		byNode[node] = append(byNode[node], e)
	}
	return byNode, unplaced
}

// eventTime is when the event last happened.
func eventTime(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// eventFindings is one WARN per pod: how often and the latest message.
func eventFindings(node string, events []corev1.Event) []Finding {
	type podEvents struct {
		count int32
		last  time.Time
		msg   string
	}
	byPod := map[string]*podEvents{}
	for i := range events {
		e := &events[i]
		k := e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
		p := byPod[k]
		if p == nil {
			p = &podEvents{}
			byPod[k] = p
		}
		n := max(e.Count, 1)
		if e.Series != nil && e.Series.Count > n {
			n = e.Series.Count
		}
		p.count += n
		if t := eventTime(e); p.msg == "" || t.After(p.last) {
			p.last, p.msg = t, e.Message
		}
	}
	pods := make([]string, 0, len(byPod))
	for k := range byPod {
		pods = append(pods, k)
	}
	sort.Strings(pods)
	var out []Finding
	for _, k := range pods {
		p := byPod[k]
		ns, name, _ := strings.Cut(k, "/")
		where := ""
		if node == "" {
			where = " (node unknown)"
		}
		out = append(out, Finding{Status: StatusWarn, Check: CheckPrepare, Node: node,
			Detail: fmt.Sprintf("pod %s%s: %s x%d in the last hour, latest: %s", k, where, ReasonFailedPrepare, p.count, truncateMessage(p.msg, maxMessage)),
			Fix:    fmt.Sprintf("kubectl describe pod -n %s %s; the claim's status (kubectl describe resourceclaim) and the agent's log", ns, name)})
	}
	return capFindings(out, StatusWarn, CheckPrepare, node, "pods with "+ReasonFailedPrepare+" events")
}

// capFindings keeps the first maxListed findings and counts the rest in one
// more of the same status.
func capFindings(fs []Finding, st Status, check, node, what string) []Finding {
	if len(fs) <= maxListed {
		return fs
	}
	rest := len(fs) - maxListed
	return append(fs[:maxListed], Finding{Status: st, Check: check, Node: node,
		Detail: fmt.Sprintf("and %d more %s", rest, what), Fix: fs[0].Fix})
}

// 7. Partitioning: the node label against what is published.

// An incomplete pool (checkSlices failed) may lack the slices holding
// placements: counter sets without them are then not judged.
func checkPartitioning(node string, n *corev1.Node, nd *NodeDevices, incomplete bool) Finding {
	f := Finding{Check: CheckPartitioning, Node: node}
	label, hasLabel := "", false
	if n != nil {
		label, hasLabel = n.Labels[PartitioningLabel]
	}
	// Counter sets (dynamic partitioning: one per GPU, named like it) and
	// the placements consuming each.
	type set struct {
		key        DeviceKey
		placements int
	}
	sets := map[DeviceKey]*set{}
	for k := range nd.CounterSets {
		sets[k] = &set{key: k}
	}
	var staticParts []string // partitions consuming no counter set
	for _, d := range nd.Devices {
		if AttrString(d.Dev, publish.AttrType) != publish.TypePartition {
			continue
		}
		if len(d.Dev.ConsumesCounters) == 0 {
			if parent := PartitionParent(d.Dev.Name); !slices.Contains(staticParts, parent) {
				staticParts = append(staticParts, parent)
			}
			continue
		}
		for _, c := range d.Dev.ConsumesCounters {
			if s := sets[DeviceKey{d.Pool, c.CounterSet}]; s != nil {
				s.placements++
			}
		}
	}
	var setNames, empty []string
	for k, s := range sets {
		setNames = append(setNames, k.Name)
		if s.placements == 0 {
			empty = append(empty, k.Name)
		}
	}
	slices.SortFunc(setNames, CompareDeviceNames)
	slices.SortFunc(empty, CompareDeviceNames)
	slices.SortFunc(staticParts, CompareDeviceNames)
	whole, partsOnly, both, dynamic := 0, 0, 0, 0
	groups := nd.GPUGroups()
	for _, g := range groups {
		switch {
		case sets[DeviceKey{g.Pool, g.Name}] != nil:
			dynamic++
		case g.Whole != nil && len(g.Partitions) > 0:
			both++
		case g.Whole != nil:
			whole++
		default:
			partsOnly++
		}
	}
	lbl := "no " + PartitioningLabel + " label"
	if hasLabel {
		lbl = PartitioningLabel + "=" + label
	}
	var kinds []string
	for _, k := range []struct {
		n    int
		what string
	}{{whole, "whole only"}, {partsOnly, "partitions only (MIG mode)"}, {both, "whole and partitions"}, {dynamic, "dynamic (a counter set each)"}} {
		if k.n > 0 {
			kinds = append(kinds, fmt.Sprintf("%d %s", k.n, k.what))
		}
	}
	looked := fmt.Sprintf("%s; %d GPUs", lbl, len(groups))
	if len(kinds) > 0 {
		looked += ": " + strings.Join(kinds, ", ")
	}
	switch {
	case incomplete:
		looked += "; the pool is incomplete: placements not judged"
		empty = nil
	case len(setNames) > 0 && len(empty) == 0:
		looked += "; every counter set has placements"
	}
	switch {
	case len(empty) > 0:
		f.Status = StatusWarn
		f.Detail = fmt.Sprintf("counter set %s published without placement devices (%s)", strings.Join(empty, ","), looked)
		f.Fix = fmt.Sprintf("a dynamic GPU offers its placements on its counter set; check the agent's log on %s for those GPUs' MIG profiles, and that every slice of the pool is published", node)
	case hasLabel && label == PartitioningStatic && len(setNames) > 0:
		f.Status = StatusWarn
		f.Detail = fmt.Sprintf("labelled static, but counter sets (dynamic partitioning) are published for %s (%s)", strings.Join(setNames, ","), looked)
		f.Fix = "the node label and the agent's --partitioning (chart value partitioning) disagree: make them match"
	case hasLabel && label == PartitioningDynamic && len(staticParts) > 0:
		f.Status = StatusWarn
		f.Detail = fmt.Sprintf("labelled dynamic, but %s publish static partitions (no counter set) (%s)", strings.Join(staticParts, ","), looked)
		f.Fix = "the node label and the agent's --partitioning (chart value partitioning) disagree: make them match"
	default:
		f.Status = StatusPass
		f.Detail = looked
	}
	return f
}

// truncateMessage shortens s to about n characters, on a rune boundary.
func truncateMessage(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
