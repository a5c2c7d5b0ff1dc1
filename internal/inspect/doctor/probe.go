package doctor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/internal/inspect/agents"
)

// ReadyzURL turns a metrics URL (http://HOST:PORT/metrics, or HOST:PORT)
// into the agent's /readyz URL on the same host and port.
func ReadyzURL(metricsURL string) (string, error) { return agents.URL(metricsURL, "/readyz") }

// probeURL asks a URL's /readyz directly.
func probeURL(ctx context.Context, hc *http.Client, metricsURL string) Readiness {
	u, err := ReadyzURL(metricsURL)
	if err != nil {
		return Readiness{State: ReadyFailed, Via: metricsURL, Detail: "bad --metrics-url: " + err.Error()}
	}
	body, err := agents.Get(ctx, hc, u)
	if err != nil {
		return Readiness{State: ReadyFailed, Via: u, Detail: err.Error()}
	}
	return Readiness{State: ReadyOK, Via: u, Detail: strings.TrimSpace(string(body))}
}

// probePod asks the node's agent pod's /readyz through the API server.
func probePod(ctx context.Context, c kubernetes.Interface, pods []corev1.Pod) Readiness {
	if len(pods) == 0 {
		return Readiness{Detail: "no agent pod found (the agent may run as a host process); readiness not checked"}
	}
	p := agents.Pick(pods)
	name := p.Namespace + "/" + p.Name
	if p.Status.Phase != corev1.PodRunning {
		d := fmt.Sprintf("agent pod %s is %s", name, p.Status.Phase)
		if w := agents.WaitingReason(p); w != "" {
			d += " (" + w + ")"
		}
		return Readiness{State: ReadyFailed, Via: "pod " + name, Detail: d}
	}
	port, ok := agents.MetricsPort(p)
	if !ok {
		return Readiness{Via: "pod " + name, Detail: "the agent pod serves no metrics port (chart metrics.enabled=false); readiness not checked"}
	}
	scheme := agents.MetricsScheme(p)
	via := fmt.Sprintf("pod %s port %s (%s) via the API server", name, port, scheme)
	// /readyz is open: no token is sent.
	body, err := agents.ProxyGet(ctx, c, p, scheme, port, "/readyz", "")
	if errors.Is(err, agents.ErrNoProxy) {
		return Readiness{Via: via, Detail: err.Error() + "; readiness not checked"}
	}
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
	if w := agents.WaitingReason(p); w != "" {
		d += " (container " + w + ")"
	}
	return Readiness{State: ReadyFailed, Via: via, Detail: d}
}
