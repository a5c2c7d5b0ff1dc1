package doctor

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/internal/inspect/agents"
	"github.com/tessera-gpu/tessera/internal/names"
)

// DefaultAgentSelector selects the agent pods of the chart's DaemonSet.
const DefaultAgentSelector = agents.DefaultSelector

// Options says what Gather reads and how it asks the
// agents.
type Options struct {
	// Nodes are the nodes named; empty: every node with slices.
	Nodes []string
	// MetricsURLs maps a node to its agent's metrics URL
	// (http://HOST:PORT/metrics as the local cluster prints it); /readyz
	// is asked there instead of through an agent pod.
	MetricsURLs map[string]string
	// AgentSelector selects the agent pods (DefaultAgentSelector if empty).
	AgentSelector string
	// HTTPClient asks MetricsURLs (http.DefaultClient if nil).
	HTTPClient *http.Client
	// ProbeTimeout bounds each /readyz request (5s if zero).
	ProbeTimeout time.Duration
	// Now is the time events are measured from (time.Now() if zero).
	Now time.Time
}

// maxPodLookups bounds the pods read to place events without a source host.
const maxPodLookups = 50

// Gather reads what the checks need from the cluster. Only the
// ResourceSlices are required; any other list that fails is recorded in the
// input (its checks then warn). It only reads: list and get, and GET
// /readyz through the pods' proxy subresource.
func Gather(ctx context.Context, c kubernetes.Interface, o Options) (*Input, error) {
	in := &Input{Nodes: o.Nodes, Now: o.Now, Readiness: map[string]Readiness{}}
	if in.Now.IsZero() {
		in.Now = time.Now()
	}
	if err := gatherSlices(ctx, c, in); err != nil {
		return nil, err
	}
	targets := in.TargetNodes()
	gatherNodes(ctx, c, in, targets)
	gatherClassesAndClaims(ctx, c, in)
	gatherEvents(ctx, c, in)
	if all, err := agents.ListPods(ctx, c, o.AgentSelector); err != nil {
		in.AgentPodsErr = err.Error()
	} else {
		in.AgentPods = all
	}
	gatherReadiness(ctx, c, o, in, targets)
	return in, nil
}

// gatherSlices lists the driver's ResourceSlices (of the one node named,
// when one is).
func gatherSlices(ctx context.Context, c kubernetes.Interface, in *Input) error {
	sel := fields.Set{"spec.driver": names.DriverName}
	if len(in.Nodes) == 1 {
		sel["spec.nodeName"] = in.Nodes[0]
	}
	sl, err := c.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: sel.AsSelector().String()})
	if err != nil {
		return fmt.Errorf("listing ResourceSlices: %w", err)
	}
	for _, s := range sl.Items {
		if s.Spec.Driver == names.DriverName {
			in.Slices = append(in.Slices, s)
		}
	}
	return nil
}

// gatherNodes reads the Nodes named (each, a missing one is no error), or
// else lists them all.
func gatherNodes(ctx context.Context, c kubernetes.Interface, in *Input, targets []string) {
	if len(in.Nodes) == 0 {
		if nl, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
			in.NodesErr = err.Error()
		} else {
			in.NodeObjects = nl.Items
		}
		return
	}
	for _, n := range targets {
		node, err := c.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			in.NodesErr = err.Error()
		default:
			in.NodeObjects = append(in.NodeObjects, *node)
		}
	}
}

// gatherClassesAndClaims lists the DeviceClasses and every ResourceClaim.
func gatherClassesAndClaims(ctx context.Context, c kubernetes.Interface, in *Input) {
	if cl, err := c.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{}); err != nil {
		in.ClassesErr = err.Error()
	} else {
		in.Classes = cl.Items
	}
	if cl, err := c.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{}); err != nil {
		in.ClaimsErr = err.Error()
	} else {
		in.Claims = cl.Items
	}
}

// gatherEvents lists the failed-prepare pod events and, for those that do
// not name the kubelet's node, reads their pods' node.
func gatherEvents(ctx context.Context, c kubernetes.Interface, in *Input) {
	sel := fields.Set{"involvedObject.kind": "Pod", "reason": ReasonFailedPrepare}.AsSelector().String()
	el, err := c.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		in.EventsErr = err.Error()
		return
	}
	since := in.Now.Add(-EventWindow)
	in.PodNodes = map[string]string{}
	lookups := 0
	for _, e := range el.Items {
		if e.Reason != ReasonFailedPrepare || e.InvolvedObject.Kind != "Pod" || eventTime(&e).Before(since) {
			continue
		}
		in.Events = append(in.Events, e)
		if e.Source.Host != "" || (e.ReportingController == "kubelet" && e.ReportingInstance != "") {
			continue
		}
		k := e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
		if _, ok := in.PodNodes[k]; ok || lookups >= maxPodLookups {
			continue
		}
		lookups++
		if p, err := c.CoreV1().Pods(e.InvolvedObject.Namespace).Get(ctx, e.InvolvedObject.Name, metav1.GetOptions{}); err == nil {
			in.PodNodes[k] = p.Spec.NodeName
		} else {
			in.PodNodes[k] = "" // gone or not readable: the event stays unplaced
		}
	}
}

// gatherReadiness asks each target node's agent /readyz: at the URL given
// for it, or through the API server's proxy to its agent pod.
func gatherReadiness(ctx context.Context, c kubernetes.Interface, o Options, in *Input, targets []string) {
	pods, podsErr := in.AgentPods, in.AgentPodsErr
	timeout := o.ProbeTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	answers := agents.Each(ctx, targets, timeout, func(pctx context.Context, n string) Readiness {
		switch {
		case o.MetricsURLs[n] != "":
			return probeURL(pctx, o.HTTPClient, o.MetricsURLs[n])
		case podsErr != "":
			return Readiness{Detail: "could not list agent pods (" + podsErr + "); readiness not checked"}
		}
		return probePod(pctx, c, pods[n])
	})
	maps.Copy(in.Readiness, answers)
}
