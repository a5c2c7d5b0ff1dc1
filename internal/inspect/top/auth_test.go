package top

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/tessera-gpu/tessera/internal/metrics"
)

// TestGatherAsksEachAgentsScheme: through the pod proxy an agent is asked
// over HTTPS when its pod says it authenticates (the chart's default), over
// HTTP when it says it does not or predates metrics.auth.
func TestGatherAsksEachAgentsScheme(t *testing.T) {
	auth := func(node, v string) *corev1.Pod {
		p := agentPod(node)
		if v != "" {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "TESSERA_METRICS_AUTH", Value: v}}
		}
		return p
	}
	c := fake.NewClientset(auth("on", "true"), auth("off", "false"), auth("old", ""))
	schemes := map[string]string{}
	c.PrependProxyReactor("pods", func(a k8stesting.Action) (bool, restclient.ResponseWrapper, error) {
		p := a.(k8stesting.ProxyGetAction)
		schemes[strings.TrimPrefix(p.GetName(), "tessera-")] = p.GetScheme()
		return true, proxied{[]byte("tessera_prepared_claims 0\n")}, nil
	})
	if _, err := Gather(context.Background(), c, Options{Token: "t"}); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"on": "https", "off": "http", "old": "http"}; !equalMaps(schemes, want) {
		t.Errorf("schemes %v, want %v", schemes, want)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestGatherSendsToken: an agent at --metrics-url that authenticates gets
// the token; without one, the warning says what to give.
func TestGatherSendsToken(t *testing.T) {
	guard := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer scraper" {
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	srv := httptest.NewTLSServer(metrics.New().GuardedHandler(guard))
	defer srv.Close()
	o := Options{Nodes: []string{"n"}, MetricsURLs: map[string]string{"n": srv.URL + "/metrics"}, HTTPClient: srv.Client()}
	if _, err := Gather(context.Background(), fake.NewClientset(), o); err == nil || !strings.Contains(err.Error(), "HTTP 401") || !strings.Contains(err.Error(), "--metrics-token-file") {
		t.Errorf("no token: %v, want the agent's 401 and what to give", err)
	}
	o.Token = "scraper"
	if _, err := Gather(context.Background(), fake.NewClientset(), o); err != nil {
		t.Errorf("with the scraper's token: %v", err)
	}
}
