package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/metrics/auth"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// The agents serve /metrics as the chart's do by default: HTTPS, and only
// to a bearer token of a user who may get /metrics (internal/metrics/auth). The
// local cluster's fake nodes' agents serve certificates of the cluster CA
// and the cluster holds a token of a metrics reader
// (localcluster/metricsauth.go); these tests scrape with both and check
// the rest against the real API server's token and access reviews.

var readerClient = sync.OnceValues(func() (*http.Client, error) {
	token, err := cluster.MetricsToken()
	if err != nil {
		return nil, err
	}
	return cluster.MetricsClient(token)
})

// metricsClient scrapes as the cluster's metrics reader.
func metricsClient(t *testing.T) *http.Client {
	t.Helper()
	hc, err := readerClient()
	if err != nil {
		t.Fatal(err)
	}
	return hc
}

// metricsClientWithToken scrapes with token ("" none), verifying the
// agents' certificates.
func metricsClientWithToken(t *testing.T, token string) *http.Client {
	t.Helper()
	hc, err := cluster.MetricsClient(token)
	if err != nil {
		t.Fatal(err)
	}
	return hc
}

// tenantToken makes a ServiceAccount in ns, which may not get /metrics
// (nothing binds it), and returns a token of it.
func tenantToken(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token, err := localcluster.ServiceAccountToken(ctx, client, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

type metricsAnswer struct {
	code int
	body string
}

func getMetrics(t *testing.T, hc *http.Client, url string, header ...string) metricsAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return metricsAnswer{resp.StatusCode, string(body)}
}

// TestMetricsAuth: against the real API server's reviews, an agent's
// /metrics answers 401 without a token or with one the API server does not
// accept, 403 to a tenant's ServiceAccount token, and the metrics to the
// metrics reader's, also through the header the API server's pod proxy
// passes on; /healthz and /readyz answer without a token, also over plain
// HTTP (the kubelet's probes), /metrics never does; and a tenant granted the reader's ClusterRole reads the
// metrics once its cached denial expires (auth.DeniedTTL).
func TestMetricsAuth(t *testing.T) {
	ctx := context.Background()
	s, err := cluster.LoadState()
	if err != nil {
		t.Fatal(err)
	}
	const node = "gpu-h100"
	url := localcluster.MetricsURL(s, node)
	base := strings.TrimSuffix(url, "/metrics")
	ns := namespace(t)
	tenant := tenantToken(t, ns, "tenant")
	reader, err := cluster.MetricsToken()
	if err != nil {
		t.Fatal(err)
	}
	anonymous := metricsClientWithToken(t, "")

	for _, tc := range []struct {
		name    string
		hc      *http.Client
		path    string
		header  []string
		want    int
		bodyHas string
	}{
		{"anonymous", anonymous, "/metrics", nil, http.StatusUnauthorized, "Unauthorized"},
		{"a token the API server rejects", metricsClientWithToken(t, "not-a-token"), "/metrics", nil, http.StatusUnauthorized, "Unauthorized"},
		{"a tenant's ServiceAccount", metricsClientWithToken(t, tenant), "/metrics", nil, http.StatusForbidden,
			fmt.Sprintf(`"system:serviceaccount:%s:tenant" cannot get path "/metrics"`, ns)},
		{"the metrics reader", metricsClient(t), "/metrics", nil, http.StatusOK, "tessera_prepared_claims"},
		{"the metrics reader, forwarded", anonymous, "/metrics", []string{auth.ForwardedAuthorizationHeader, "Bearer " + reader}, http.StatusOK, "tessera_prepared_claims"},
		{"a tenant, forwarded", anonymous, "/metrics", []string{auth.ForwardedAuthorizationHeader, "Bearer " + tenant}, http.StatusForbidden, "cannot get path"},
		{"liveness, anonymous", anonymous, "/healthz", nil, http.StatusOK, "ok"},
		{"readiness, anonymous", anonymous, "/readyz", nil, http.StatusOK, "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := getMetrics(t, tc.hc, base+tc.path, tc.header...)
			if got.code != tc.want || !strings.Contains(got.body, tc.bodyHas) {
				t.Errorf("GET %s: %d %q, want %d with %q", tc.path, got.code, got.body, tc.want, tc.bodyHas)
			}
		})
	}

	// Plain HTTP answers the kubelet's probes and nothing else.
	t.Run("plain HTTP", func(t *testing.T) {
		plain := "http://" + localcluster.MetricsAddress(s, node)
		for path, want := range map[string]int{"/healthz": http.StatusOK, "/readyz": http.StatusOK, "/metrics": http.StatusBadRequest} {
			resp, err := http.Get(plain + path)
			if err != nil {
				t.Fatalf("GET %s%s: %v", plain, path, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want || strings.Contains(string(body), "tessera_") {
				t.Errorf("GET %s%s: %s %q, want %d and no metrics", plain, path, resp.Status, body, want)
			}
		}
	})

	t.Run("granted", func(t *testing.T) {
		name := "e2e-tenant-metrics-" + ns
		b := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: localcluster.MetricsReaderName},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "tenant"}},
		}
		if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = client.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{}) })
		hc := metricsClientWithToken(t, tenant)
		if err := scenario.Poll(ctx, auth.DeniedTTL+30*time.Second, func() (bool, string) {
			got := getMetrics(t, hc, url)
			return got.code == http.StatusOK && strings.Contains(got.body, "tessera_prepared_claims"), fmt.Sprintf("%d %.200s", got.code, got.body)
		}); err != nil {
			t.Errorf("the tenant bound to %s: %v", localcluster.MetricsReaderName, err)
		}
	})
}

// TestMetricsAuthPrometheus: a real Prometheus scraping every agent as the
// chart's ServiceMonitor does (HTTPS, the metrics reader's token) has
// every target up, while the same scrape without a token is refused 401
// and with a tenant's token 403, on every agent.
func TestMetricsAuthPrometheus(t *testing.T) {
	s, err := cluster.LoadState()
	if err != nil {
		t.Fatal(err)
	}
	ns := namespace(t)
	tenantFile := filepath.Join(t.TempDir(), "tenant.token")
	if err := os.WriteFile(tenantFile, []byte(tenantToken(t, ns, "tenant")), 0o600); err != nil {
		t.Fatal(err)
	}
	prom := startPrometheusWith(t, s,
		agentsJob(s, promJob, map[string]any{"type": "Bearer", "credentials_file": cluster.MetricsTokenFile()}),
		agentsJob(s, "anonymous", nil),
		agentsJob(s, "tenant", map[string]any{"type": "Bearer", "credentials_file": tenantFile}),
	)
	want := map[string]struct{ health, errorHas string }{
		promJob:     {"up", ""},
		"anonymous": {"down", "401"},
		"tenant":    {"down", "403"},
	}
	if err := scenario.Poll(context.Background(), 60*time.Second, func() (bool, string) {
		var data struct {
			ActiveTargets []struct {
				Labels    map[string]string `json:"labels"`
				Health    string            `json:"health"`
				LastError string            `json:"lastError"`
			} `json:"activeTargets"`
		}
		if err := prom.API("/api/v1/targets", nil, &data); err != nil {
			return false, err.Error()
		}
		seen := map[string]int{}
		for _, tg := range data.ActiveTargets {
			job := tg.Labels["job"]
			w, ok := want[job]
			if !ok {
				continue
			}
			if tg.Health != w.health || !strings.Contains(tg.LastError, w.errorHas) {
				return false, fmt.Sprintf("job %s node %s: %s %q, want %s with %q", job, tg.Labels["node"], tg.Health, tg.LastError, w.health, w.errorHas)
			}
			seen[job]++
		}
		for job := range want {
			if seen[job] != len(nodes) {
				return false, fmt.Sprintf("job %s: %d targets scraped as wanted, want %d", job, seen[job], len(nodes))
			}
		}
		return true, ""
	}); err != nil {
		t.Error(err)
	}
}

// TestKubectlTesseraTopAuth: kubectl tessera top sends the agents a token:
// with the admin kubeconfig's client certificate there is none and the
// agents' 401 says to give --metrics-token-file; a tenant's token gets
// their 403; the metrics reader's token reads every node.
func TestKubectlTesseraTopAuth(t *testing.T) {
	s, err := cluster.LoadState()
	if err != nil {
		t.Fatal(err)
	}
	ns := namespace(t)
	tenantFile := filepath.Join(t.TempDir(), "tenant.token")
	if err := os.WriteFile(tenantFile, []byte(tenantToken(t, ns, "tenant")), 0o600); err != nil {
		t.Fatal(err)
	}
	urls := []string{"top", "nodes", "--metrics-ca-file", cluster.MetricsCAFile()}
	for _, n := range nodes {
		urls = append(urls, "--metrics-url", n.Name+"="+localcluster.MetricsURL(s, n.Name))
	}
	for _, tc := range []struct {
		name   string
		extra  []string
		ok     bool
		outHas string
	}{
		{"no token", nil, false, "--metrics-token-file"},
		{"a tenant's token", []string{"--metrics-token-file", tenantFile}, false, "HTTP 403"},
		{"the metrics reader's token", []string{"--metrics-token-file", cluster.MetricsTokenFile()}, true, nodes[0].Name},
	} {
		out, ok := kubectlTesseraStatus(t, append(append([]string{}, urls...), tc.extra...)...)
		if ok != tc.ok || !strings.Contains(out, tc.outHas) {
			t.Errorf("%s: exit 0 %v, output:\n%s\nwant exit 0 %v with %q", tc.name, ok, out, tc.ok, tc.outHas)
		}
	}
}
