package doctor

import (
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/names"
)

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
	CheckDriver        = "driver"
)

// PartitioningLabel is the node label the local cluster sets to the
// agent's --partitioning (static or dynamic). Real clusters may not set it.
const PartitioningLabel = "tessera.dev/partitioning"

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

// Input is everything the checks look at. Lists hold what was read;
// the *Err fields say why a list could not be read (its checks then warn
// instead of judging).
type Input struct {
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
	// AgentPods are the agent pods by node; AgentPodsErr says why they
	// could not be listed.
	AgentPods    map[string][]corev1.Pod
	AgentPodsErr string
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
func (in *Input) driverSlices() map[string][]resourceapi.ResourceSlice {
	out := map[string][]resourceapi.ResourceSlice{}
	for i := range in.Slices {
		s := &in.Slices[i]
		if s.Spec.Driver != names.DriverName {
			continue
		}
		n := nodeOfSlice(s)
		out[n] = append(out[n], *s)
	}
	return out
}

// TargetNodes are the nodes checked one by one: those named, or else every
// node with slices of the driver, sorted.
func (in *Input) TargetNodes() []string {
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

func (in *Input) now() time.Time {
	if in.Now.IsZero() {
		return time.Now()
	}
	return in.Now
}
