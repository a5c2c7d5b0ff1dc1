package inspect

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// DefaultAgentSelector selects the agent pods of the chart's DaemonSet
// (deployments/helm/tessera, templates/_helpers.tpl tessera.selectorLabels;
// the webhook's pods are component webhook).
const DefaultAgentSelector = "app.kubernetes.io/name=tessera,app.kubernetes.io/component=kubelet-plugin"

// DefaultMetricsPort is the agent's --metrics-address port (and the chart's
// metrics.port), used when its pod does not name a "metrics" port.
const DefaultMetricsPort = 9478

// DoctorOptions says what GatherDoctorInput reads and how it asks the
// agents.
type DoctorOptions struct {
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

// probeConcurrency is how many agents are asked at once.
const probeConcurrency = 8

// GatherDoctorInput reads what the checks need from the cluster. Only the
// ResourceSlices are required; any other list that fails is recorded in the
// input (its checks then warn). It only reads: list and get, and GET
// /readyz through the pods' proxy subresource.
func GatherDoctorInput(ctx context.Context, c kubernetes.Interface, o DoctorOptions) (*DoctorInput, error) {
	in := &DoctorInput{Nodes: o.Nodes, Now: o.Now, Readiness: map[string]Readiness{}}
	if in.Now.IsZero() {
		in.Now = time.Now()
	}

	sel := fields.Set{"spec.driver": DriverName}
	if len(o.Nodes) == 1 {
		sel["spec.nodeName"] = o.Nodes[0]
	}
	sl, err := c.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: sel.AsSelector().String()})
	if err != nil {
		return nil, fmt.Errorf("listing ResourceSlices: %w", err)
	}
	for _, s := range sl.Items {
		if s.Spec.Driver == DriverName {
			in.Slices = append(in.Slices, s)
		}
	}
	targets := in.TargetNodes()

	if len(o.Nodes) > 0 {
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
	} else if nl, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		in.NodesErr = err.Error()
	} else {
		in.NodeObjects = nl.Items
	}

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
	gatherEvents(ctx, c, in)
	gatherReadiness(ctx, c, o, in, targets)
	return in, nil
}

// gatherEvents lists the failed-prepare pod events and, for those that do
// not name the kubelet's node, reads their pods' node.
func gatherEvents(ctx context.Context, c kubernetes.Interface, in *DoctorInput) {
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
func gatherReadiness(ctx context.Context, c kubernetes.Interface, o DoctorOptions, in *DoctorInput, targets []string) {
	pods := map[string][]corev1.Pod{}
	podsErr := ""
	needPods := false
	for _, n := range targets {
		if o.MetricsURLs[n] == "" {
			needPods = true
		}
	}
	if needPods {
		selector := o.AgentSelector
		if selector == "" {
			selector = DefaultAgentSelector
		}
		pl, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			podsErr = err.Error()
		} else {
			for _, p := range pl.Items {
				if p.Spec.NodeName != "" {
					pods[p.Spec.NodeName] = append(pods[p.Spec.NodeName], p)
				}
			}
		}
	}
	timeout := o.ProbeTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, probeConcurrency)
	for _, n := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			pctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			var r Readiness
			switch {
			case o.MetricsURLs[n] != "":
				r = probeURL(pctx, o.HTTPClient, o.MetricsURLs[n])
			case podsErr != "":
				r = Readiness{Detail: "could not list agent pods (" + podsErr + "); readiness not checked"}
			default:
				r = probePod(pctx, c, pods[n])
			}
			mu.Lock()
			in.Readiness[n] = r
			mu.Unlock()
		}()
	}
	wg.Wait()
}

// ReadyzURL turns a metrics URL (http://HOST:PORT/metrics, or HOST:PORT)
// into the agent's /readyz URL on the same host and port.
func ReadyzURL(metricsURL string) (string, error) {
	s := strings.TrimSpace(metricsURL)
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", err
	}
	if u.Host == "" {
		return "", fmt.Errorf("%q has no host", metricsURL)
	}
	p := strings.TrimSuffix(u.Path, "/")
	switch {
	case strings.HasSuffix(p, "/readyz"):
	case strings.HasSuffix(p, "/metrics"):
		p = strings.TrimSuffix(p, "/metrics") + "/readyz"
	default:
		p += "/readyz"
	}
	u.Path, u.RawQuery, u.Fragment = p, "", ""
	return u.String(), nil
}

// probeURL asks a URL's /readyz directly.
func probeURL(ctx context.Context, hc *http.Client, metricsURL string) Readiness {
	u, err := ReadyzURL(metricsURL)
	if err != nil {
		return Readiness{State: ReadyFailed, Via: metricsURL, Detail: "bad --metrics-url: " + err.Error()}
	}
	r := Readiness{Via: u}
	if hc == nil {
		hc = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		r.State, r.Detail = ReadyFailed, err.Error()
		return r
	}
	resp, err := hc.Do(req)
	if err != nil {
		r.State, r.Detail = ReadyFailed, err.Error()
		return r
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	r.Detail = strings.TrimSpace(string(body))
	if resp.StatusCode == http.StatusOK {
		r.State = ReadyOK
		return r
	}
	r.State = ReadyFailed
	r.Detail = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, r.Detail)
	return r
}

// probePod asks the node's agent pod's /readyz through the API server.
func probePod(ctx context.Context, c kubernetes.Interface, pods []corev1.Pod) Readiness {
	if len(pods) == 0 {
		return Readiness{Detail: "no agent pod found (the agent may run as a host process); readiness not checked"}
	}
	// The running one, else the newest.
	sort.SliceStable(pods, func(a, b int) bool {
		ra, rb := pods[a].Status.Phase == corev1.PodRunning, pods[b].Status.Phase == corev1.PodRunning
		if ra != rb {
			return ra
		}
		return pods[b].CreationTimestamp.Before(&pods[a].CreationTimestamp)
	})
	p := &pods[0]
	name := p.Namespace + "/" + p.Name
	if p.Status.Phase != corev1.PodRunning {
		d := fmt.Sprintf("agent pod %s is %s", name, p.Status.Phase)
		if w := waitingReason(p); w != "" {
			d += " (" + w + ")"
		}
		return Readiness{State: ReadyFailed, Via: "pod " + name, Detail: d}
	}
	port, ok := metricsPort(p)
	if !ok {
		return Readiness{Via: "pod " + name, Detail: "the agent pod serves no metrics port (chart metrics.enabled=false); readiness not checked"}
	}
	via := fmt.Sprintf("pod %s port %s via the API server", name, port)
	rw := c.CoreV1().Pods(p.Namespace).ProxyGet("http", p.Name, port, "/readyz", nil)
	if rw == nil {
		return Readiness{Via: via, Detail: "the API server's pod proxy gave no answer; readiness not checked"}
	}
	body, err := rw.DoRaw(ctx)
	answer := strings.TrimSpace(string(body))
	switch {
	case err == nil:
		return Readiness{State: ReadyOK, Via: via, Detail: answer}
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return Readiness{Via: via, Detail: "not allowed to proxy to the agent pod (needs get pods/proxy): " + err.Error() + "; readiness not checked"}
	}
	d := err.Error()
	if answer != "" && !strings.HasPrefix(answer, "{") {
		d = answer
	}
	if w := waitingReason(p); w != "" {
		d += " (container " + w + ")"
	}
	return Readiness{State: ReadyFailed, Via: via, Detail: d}
}

// metricsPort is the pod's port named "metrics", else the default if any
// container listens on it.
func metricsPort(p *corev1.Pod) (string, bool) {
	for _, ct := range p.Spec.Containers {
		for _, cp := range ct.Ports {
			if cp.Name == "metrics" {
				return strconv.Itoa(int(cp.ContainerPort)), true
			}
		}
	}
	for _, ct := range p.Spec.Containers {
		for _, cp := range ct.Ports {
			if cp.ContainerPort == DefaultMetricsPort {
				return strconv.Itoa(DefaultMetricsPort), true
			}
		}
	}
	return "", false
}

// waitingReason is why a container of the pod is waiting
// (CrashLoopBackOff, ...), if one is.
func waitingReason(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return cs.Name + " " + w.Reason
		}
	}
	return ""
}
