package doctor

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
)

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
