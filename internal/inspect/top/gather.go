package top

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/internal/inspect/agents"
	"github.com/tessera-gpu/tessera/internal/names"
)

// Options says where Gather reads the metrics.
type Options struct {
	// Nodes are the nodes asked; empty: every node with an agent pod or a
	// MetricsURLs entry (or, from Prometheus, every node it has).
	Nodes []string
	// MetricsURLs maps a node to its agent's metrics URL, asked directly
	// instead of through the agent's pod.
	MetricsURLs map[string]string
	// AgentSelector selects the agent pods (agents.DefaultSelector if empty).
	AgentSelector string
	// PrometheusURL, when set, is asked instead of the agents.
	PrometheusURL string
	// HTTPClient asks MetricsURLs and PrometheusURL (http.DefaultClient if nil).
	HTTPClient *http.Client
	// Token is the bearer token the agents get (over HTTPS only): the
	// caller's own, or one of --metrics-token-file. An agent with
	// authentication on (the chart's default) reads /metrics only to a
	// user who may get /metrics.
	Token string
	// Timeout bounds each request (5s if zero).
	Timeout time.Duration
}

// Result is what Gather read; Warnings say what it could not, per node.
type Result struct {
	Series   []Series
	Shares   Shares
	Warnings []string
}

// Gather reads the series of the agents (or of Prometheus) and the shares'
// memory from the ResourceClaims. A node that does not answer is a
// warning; no answer at all is an error.
func Gather(ctx context.Context, c kubernetes.Interface, o Options) (*Result, error) {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	res := &Result{Shares: Shares{}}
	var err error
	if o.PrometheusURL != "" {
		res.Series, err = fromPrometheus(ctx, o)
	} else {
		res.Series, res.Warnings, err = fromAgents(ctx, c, o)
	}
	if err != nil {
		return nil, err
	}
	if needShares(res.Series) {
		if err := readShares(ctx, c, res.Shares); err != nil {
			res.Warnings = append(res.Warnings, "shares: "+err.Error()+"; a share's memory is shown as the device's")
		}
	}
	return res, nil
}

func fromPrometheus(ctx context.Context, o Options) ([]Series, error) {
	base := strings.TrimSuffix(strings.TrimSpace(o.PrometheusURL), "/")
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("--prometheus-url %q: want http(s)://HOST[:PORT][/PATH]", o.PrometheusURL)
	}
	q := Query
	if len(o.Nodes) > 0 {
		q = strings.TrimSuffix(Query, "}") + `,node=~"` + strings.Join(quoteRegex(o.Nodes), "|") + `"}`
	}
	qctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	body, err := agents.Get(qctx, o.HTTPClient, base+"/api/v1/query?query="+url.QueryEscape(q))
	var se *agents.StatusError
	if err != nil && !(errors.As(err, &se) && bytes.HasPrefix(bytes.TrimSpace(body), []byte("{"))) {
		return nil, fmt.Errorf("query Prometheus at %s: %w", base, err)
	}
	s, err := ParseQuery(body)
	if err != nil {
		return nil, fmt.Errorf("query Prometheus at %s: %w", base, err)
	}
	if len(s) == 0 {
		return nil, fmt.Errorf("Prometheus at %s has no Tessera GPU series: does it scrape the agents' metrics (the chart's serviceMonitor)?", base)
	}
	return s, nil
}

func quoteRegex(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.NewReplacer(`\`, `\\`, `.`, `\\.`, `"`, `\"`).Replace(s)
	}
	return out
}

func fromAgents(ctx context.Context, c kubernetes.Interface, o Options) ([]Series, []string, error) {
	targets := slices.Clone(o.Nodes)
	var pods map[string][]corev1.Pod
	var podsErr error
	needPods := len(targets) == 0
	for _, n := range targets {
		needPods = needPods || o.MetricsURLs[n] == ""
	}
	if needPods {
		pods, podsErr = agents.ListPods(ctx, c, o.AgentSelector)
	}
	if len(targets) == 0 {
		seen := map[string]bool{}
		for n := range o.MetricsURLs {
			seen[n] = true
		}
		for n := range pods {
			seen[n] = true
		}
		for n := range seen {
			targets = append(targets, n)
		}
		slices.Sort(targets)
	}
	if len(targets) == 0 {
		why := "no agent pods"
		if podsErr != nil {
			why = "listing agent pods failed (" + podsErr.Error() + ")"
		}
		return nil, nil, fmt.Errorf("no Tessera agent to ask: %s; name the agents that run as host processes with --metrics-url NODE=URL, or ask Prometheus with --prometheus-url", why)
	}
	type answer struct {
		series []Series
		err    error
	}
	answers := agents.Each(ctx, targets, o.Timeout, func(actx context.Context, n string) answer {
		s, err := scrapeAgent(actx, c, o, n, pods[n], podsErr)
		return answer{s, err}
	})
	var (
		all      []Series
		warnings []string
		answered int
	)
	for _, n := range targets {
		a := answers[n]
		if a.err != nil {
			warnings = append(warnings, "node "+n+": "+a.err.Error())
			continue
		}
		answered++
		all = append(all, a.series...)
	}
	slices.Sort(warnings)
	if answered == 0 {
		return nil, nil, fmt.Errorf("no agent answered:\n  %s", strings.Join(warnings, "\n  "))
	}
	return all, warnings, nil
}

// scrapeAgent reads node's agent /metrics: at its --metrics-url, else
// through the API server's proxy to its pod.
func scrapeAgent(ctx context.Context, c kubernetes.Interface, o Options, node string, pods []corev1.Pod, podsErr error) ([]Series, error) {
	if mu := o.MetricsURLs[node]; mu != "" {
		u, err := agents.URL(mu, "/metrics")
		if err != nil {
			return nil, fmt.Errorf("--metrics-url: %w", err)
		}
		body, err := agents.GetWithToken(ctx, o.HTTPClient, u, o.Token)
		if err != nil {
			return nil, fmt.Errorf("%s: %w%s", u, err, tokenHint(err, o.Token))
		}
		return ParseText(bytes.NewReader(body), node)
	}
	if podsErr != nil {
		return nil, fmt.Errorf("could not list agent pods: %w", podsErr)
	}
	p := agents.Pick(pods)
	if p == nil {
		return nil, errors.New("no agent pod (an agent run as a host process needs --metrics-url)")
	}
	port, ok := agents.MetricsPort(p)
	if !ok {
		return nil, fmt.Errorf("agent pod %s/%s serves no metrics port (chart metrics.enabled=false)", p.Namespace, p.Name)
	}
	scheme := agents.MetricsScheme(p)
	body, err := agents.ProxyGet(ctx, c, p, scheme, port, "/metrics", o.Token)
	if err != nil {
		return nil, fmt.Errorf("agent pod %s/%s port %s (%s) via the API server (needs get pods/proxy there, and get on /metrics): %w%s", p.Namespace, p.Name, port, scheme, err, tokenHint(err, o.Token))
	}
	return ParseText(bytes.NewReader(body), node)
}

// tokenHint says what to do about an agent's 401: the API server already
// accepted the caller (it listed the pods or proxied), so a 401 is the
// agent's, and without a token there was nothing for it to review.
func tokenHint(err error, token string) string {
	var se *agents.StatusError
	if token != "" || !(apierrors.IsUnauthorized(err) || errors.As(err, &se) && se.Code == http.StatusUnauthorized) {
		return ""
	}
	return "; your credentials hold no bearer token (a client certificate?) for the agent to review: give --metrics-token-file, e.g. a token of a ServiceAccount that may get /metrics (kubectl create token), or use --prometheus-url"
}

func needShares(series []Series) bool {
	for _, s := range series {
		if s.Name == metricAllocation && s.Labels["share_id"] != "" {
			return true
		}
	}
	return false
}

// readShares records the memory each share of a Tessera device consumed,
// from the claims' allocations (the scheduler's consumedCapacity).
func readShares(ctx context.Context, c kubernetes.Interface, out Shares) error {
	cl, err := c.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list resourceclaims: %w", err)
	}
	for _, claim := range cl.Items {
		a := claim.Status.Allocation
		if a == nil {
			continue
		}
		for _, r := range a.Devices.Results {
			if r.Driver != names.DriverName || r.ShareID == nil {
				continue
			}
			if q, ok := r.ConsumedCapacity["memory"]; ok {
				out[ShareKey{claim.Namespace, claim.Name, r.Pool, r.Device, string(*r.ShareID)}] = q.Value()
			}
		}
	}
	return nil
}
