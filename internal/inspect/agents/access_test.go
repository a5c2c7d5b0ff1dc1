package agents

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tessera-gpu/tessera/internal/names"
)

func TestMetricsScheme(t *testing.T) {
	withEnv := func(v string) corev1.Container {
		return corev1.Container{Env: []corev1.EnvVar{{Name: "TESSERA_METRICS_AUTH", Value: v}}}
	}
	for _, tc := range []struct {
		name string
		c    corev1.Container
		want string
	}{
		{"the chart's default", withEnv("true"), "https"},
		{"metrics.auth.enabled=false", withEnv("false"), "http"},
		{"env in any case", withEnv("False"), "http"},
		{"a chart before metrics.auth", corev1.Container{}, "http"},
	} {
		p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{tc.c}}}
		if got := MetricsScheme(p); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestBearerToken: the token the caller's credentials send the API
// server, whatever kind of kubeconfig credential holds it; none for a
// client certificate.
func TestBearerToken(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  rest.Config
		want string
	}{
		{"token", rest.Config{BearerToken: "abc"}, "abc"},
		{"token file", rest.Config{BearerTokenFile: file}, "from-file"},
		{"client certificate", rest.Config{TLSClientConfig: rest.TLSClientConfig{CertData: []byte("c"), KeyData: []byte("k")}}, ""},
		{"basic auth", rest.Config{Username: "u", Password: "p"}, ""},
	} {
		got, err := BearerToken(&tc.cfg)
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

func TestReadTokenFile(t *testing.T) {
	dir := t.TempDir()
	good, empty := filepath.Join(dir, "good"), filepath.Join(dir, "empty")
	os.WriteFile(good, []byte("  tok\n"), 0o600)
	os.WriteFile(empty, []byte("\n"), 0o600)
	if got, err := ReadTokenFile(good); got != "tok" || err != nil {
		t.Errorf("good: %q, %v", got, err)
	}
	for _, p := range []string{empty, filepath.Join(dir, "missing")} {
		if _, err := ReadTokenFile(p); err == nil || !strings.Contains(err.Error(), "--metrics-token-file") {
			t.Errorf("%s: %v, want an error naming the flag", p, err)
		}
	}
}

// recorder is an agent that records the headers it was sent.
type recorder struct {
	mu      sync.Mutex
	headers []http.Header
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.headers = append(r.headers, req.Header.Clone())
	r.mu.Unlock()
	w.Write([]byte("ok\n"))
}

func (r *recorder) last() http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.headers[len(r.headers)-1]
}

// TestGetWithToken: the token goes only over HTTPS.
func TestGetWithToken(t *testing.T) {
	rec := &recorder{}
	tlsSrv := httptest.NewTLSServer(rec)
	defer tlsSrv.Close()
	if _, err := GetWithToken(context.Background(), tlsSrv.Client(), tlsSrv.URL+"/metrics", "secret"); err != nil {
		t.Fatal(err)
	}
	if h := rec.last(); h.Get("Authorization") != "Bearer secret" || h.Get(names.ForwardedAuthorizationHeader) != "Bearer secret" {
		t.Errorf("over HTTPS: headers %v, want the token", h)
	}
	plain := httptest.NewServer(rec)
	defer plain.Close()
	if _, err := GetWithToken(context.Background(), plain.Client(), plain.URL+"/metrics", "secret"); err != nil {
		t.Fatal(err)
	}
	if h := rec.last(); h.Get("Authorization") != "" || h.Get(names.ForwardedAuthorizationHeader) != "" {
		t.Errorf("over plain HTTP: headers %v, want no token", h)
	}
}

// TestHTTPClient: --metrics-ca-file is what an agent's certificate is
// verified against; without it a self-signed agent is refused.
func TestHTTPClient(t *testing.T) {
	srv := httptest.NewTLSServer(&recorder{})
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	hc, err := HTTPClient(ca)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Get(context.Background(), hc, srv.URL+"/metrics"); err != nil {
		t.Errorf("with the CA: %v", err)
	}
	def, err := HTTPClient("")
	if err != nil || def != nil {
		t.Fatalf("no CA file: %v, %v; want the default client", def, err)
	}
	if _, err := Get(context.Background(), def, srv.URL+"/metrics"); err == nil {
		t.Error("the default client accepted a certificate no system root signed")
	}
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, []byte("not pem"), 0o600)
	for _, f := range []string{bad, filepath.Join(t.TempDir(), "missing")} {
		if _, err := HTTPClient(f); err == nil || !strings.Contains(err.Error(), "--metrics-ca-file") {
			t.Errorf("%s: %v, want an error naming the flag", f, err)
		}
	}
}

// TestProxyGetForwardsToken: through a (recorded) API server the request
// names the pod's scheme and port, carries the client's own credentials
// and, over HTTPS only, the token in the forwarded header the API server
// passes on to the pod.
func TestProxyGetForwardsToken(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	var headers []http.Header
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths, headers = append(paths, r.URL.Path), append(headers, r.Header.Clone())
		mu.Unlock()
		w.Write([]byte("tessera_prepared_claims 0\n"))
	}))
	defer api.Close()
	c, err := kubernetes.NewForConfig(&rest.Config{Host: api.URL, BearerToken: "caller", TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "tessera-system", Name: "tessera-abc"}}
	for _, tc := range []struct {
		scheme, token, wantPath, wantForwarded string
	}{
		{"https", "caller", "/api/v1/namespaces/tessera-system/pods/https:tessera-abc:9478/proxy/metrics", "Bearer caller"},
		{"https", "", "/api/v1/namespaces/tessera-system/pods/https:tessera-abc:9478/proxy/metrics", ""},
		{"http", "caller", "/api/v1/namespaces/tessera-system/pods/http:tessera-abc:9478/proxy/metrics", ""},
	} {
		body, err := ProxyGet(context.Background(), c, pod, tc.scheme, "9478", "/metrics", tc.token)
		if err != nil || !strings.Contains(string(body), "tessera_prepared_claims") {
			t.Fatalf("%s: %q, %v", tc.scheme, body, err)
		}
		mu.Lock()
		path, h := paths[len(paths)-1], headers[len(headers)-1]
		mu.Unlock()
		if path != tc.wantPath {
			t.Errorf("%s: asked %s, want %s", tc.scheme, path, tc.wantPath)
		}
		if got := h.Get(names.ForwardedAuthorizationHeader); got != tc.wantForwarded {
			t.Errorf("%s with token %q: forwarded %q, want %q", tc.scheme, tc.token, got, tc.wantForwarded)
		}
		if got := h.Get("Authorization"); got != "Bearer caller" {
			t.Errorf("%s: Authorization %q: the API server gets the client's own credentials", tc.scheme, got)
		}
	}
}
