package agents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tessera-gpu/tessera/internal/names"
)

// DefaultSelector selects the agent pods of the chart's DaemonSet
// (deployments/helm/tessera, templates/_helpers.tpl tessera.selectorLabels;
// the webhook's pods are component webhook).
const DefaultSelector = "app.kubernetes.io/name=tessera,app.kubernetes.io/component=kubelet-plugin"

// DefaultMetricsPort is the agent's --metrics-address port (and the chart's
// metrics.port), used when its pod does not name a "metrics" port.
const DefaultMetricsPort = 9478

// metricsAddressEnv is the agent's --metrics-address as the chart sets it.
const metricsAddressEnv = "TESSERA_METRICS_ADDRESS"

// maxBody bounds what is read of an answer: an agent's /metrics is well
// under 1 MiB (docs/metrics.md, "Cardinality").
const maxBody = 8 << 20

// URL turns a metrics URL (http://HOST:PORT/metrics, or HOST:PORT, as the
// local cluster prints it) into the URL of path on the same host and port.
func URL(metricsURL, path string) (string, error) {
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
	for _, known := range []string{"/metrics", "/readyz", "/healthz"} {
		p = strings.TrimSuffix(p, known)
	}
	u.Path, u.RawQuery, u.Fragment = p+path, "", ""
	return u.String(), nil
}

// ParseURLs reads the NODE=URL pairs of a --metrics-url flag.
func ParseURLs(pairs []string) (map[string]string, error) {
	out := map[string]string{}
	for _, p := range pairs {
		node, u, ok := strings.Cut(p, "=")
		if !ok || node == "" || u == "" {
			return nil, fmt.Errorf("--metrics-url %q: want NODE=URL", p)
		}
		if _, err := URL(u, "/metrics"); err != nil {
			return nil, fmt.Errorf("--metrics-url %q: %w", p, err)
		}
		out[node] = u
	}
	return out, nil
}

// ListPods lists the agent pods (selector, DefaultSelector if empty) in
// all namespaces, by node. The error is the API server's, unwrapped:
// callers say what they needed the pods for.
func ListPods(ctx context.Context, c kubernetes.Interface, selector string) (map[string][]corev1.Pod, error) {
	if selector == "" {
		selector = DefaultSelector
	}
	pl, err := c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	pods := map[string][]corev1.Pod{}
	for _, p := range pl.Items {
		if p.Spec.NodeName != "" {
			pods[p.Spec.NodeName] = append(pods[p.Spec.NodeName], p)
		}
	}
	return pods, nil
}

// Pick is the pod of a node's agent pods to ask: the running one, else
// the newest (during a surge upgrade two run; the newer serves). Nil for
// none.
func Pick(pods []corev1.Pod) *corev1.Pod {
	if len(pods) == 0 {
		return nil
	}
	pods = append([]corev1.Pod(nil), pods...)
	sort.SliceStable(pods, func(a, b int) bool {
		ra, rb := pods[a].Status.Phase == corev1.PodRunning, pods[b].Status.Phase == corev1.PodRunning
		if ra != rb {
			return ra
		}
		return pods[b].CreationTimestamp.Before(&pods[a].CreationTimestamp)
	})
	return &pods[0]
}

// MetricsPort is the pod's port named "metrics", else the port of the
// agent's --metrics-address as the chart sets it (TESSERA_METRICS_ADDRESS:
// on the host network with surge upgrades the chart declares no port, a
// declared one being a host port the surge pod could not get), else the
// default if a container declares it; false when it serves none (chart
// metrics.enabled=false).
func MetricsPort(p *corev1.Pod) (string, bool) {
	for _, ct := range p.Spec.Containers {
		for _, cp := range ct.Ports {
			if cp.Name == "metrics" {
				return strconv.Itoa(int(cp.ContainerPort)), true
			}
		}
	}
	for _, ct := range p.Spec.Containers {
		for _, e := range ct.Env {
			if e.Name != metricsAddressEnv || e.ValueFrom != nil {
				continue
			}
			if _, port, err := net.SplitHostPort(e.Value); err == nil && port != "" && port != "0" {
				return port, true
			}
			return "", false // empty: metrics off
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

// WaitingReason is why a container of the pod is waiting
// (CrashLoopBackOff, ...), if one is.
func WaitingReason(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return cs.Name + " " + w.Reason
		}
	}
	return ""
}

// ErrNoProxy is a proxy request the client could not even build.
var ErrNoProxy = errors.New("the API server's pod proxy gave no answer")

// ProxyGet asks path of the pod's port through the API server (get
// pods/proxy) with scheme (MetricsScheme). token, when set, goes to the
// agent as names.ForwardedAuthorizationHeader, over HTTPS only: the API
// server authenticates the caller by Authorization and strips it, and
// connects to the pod with no credentials of its own, so the caller's
// token is how the agent learns who asks. The body comes back with a
// failure too: the agent's or the API server's words.
func ProxyGet(ctx context.Context, c kubernetes.Interface, p *corev1.Pod, scheme, port, path, token string) ([]byte, error) {
	rw := c.CoreV1().Pods(p.Namespace).ProxyGet(scheme, p.Name, port, path, nil)
	if rw == nil {
		return nil, ErrNoProxy
	}
	if req, ok := rw.(*rest.Request); ok && token != "" && scheme == "https" {
		h := http.Header{}
		authorize(h, scheme, token)
		// Not Authorization: that is the API server's, and set from
		// the client's own credentials.
		req.SetHeader(names.ForwardedAuthorizationHeader, h.Get(names.ForwardedAuthorizationHeader))
	}
	return rw.DoRaw(ctx)
}

// Get asks url directly; an answer other than 200 is an error with the
// status and the body's first line.
func Get(ctx context.Context, hc *http.Client, u string) ([]byte, error) {
	return GetWithToken(ctx, hc, u, "")
}

// GetWithToken is Get with token as the request's bearer token, sent only
// when u is HTTPS.
func GetWithToken(ctx context.Context, hc *http.Client, u, token string) ([]byte, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	authorize(req.Header, req.URL.Scheme, token)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		return body, &StatusError{Code: resp.StatusCode, Body: strings.TrimSpace(string(body))}
	}
	return body, nil
}

// StatusError is an answer other than 200 OK.
type StatusError struct {
	Code int
	Body string
}

func (e *StatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Code, e.Body) }

// concurrency is how many agents are asked at once.
const concurrency = 8

// Each asks every node's agent with ask, a few at a time, each call with
// its own context bounded by timeout, and returns the answers by node.
func Each[T any](ctx context.Context, nodes []string, timeout time.Duration, ask func(ctx context.Context, node string) T) map[string]T {
	out := make(map[string]T, len(nodes))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, concurrency)
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			actx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			v := ask(actx, n)
			mu.Lock()
			out[n] = v
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}
