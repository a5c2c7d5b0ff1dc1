package agent

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
)

// TestMetricsAuthFlags: authentication is on unless turned off, from the
// command line or TESSERA_METRICS_AUTH, and the TLS flags are checked.
func TestMetricsAuthFlags(t *testing.T) {
	var c Config
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	c.AddFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if !c.MetricsAuth || c.MetricsTLSCertFile != "" || c.MetricsTLSKeyFile != "" {
		t.Errorf("defaults: auth %v, cert %q, key %q; want on with a generated certificate", c.MetricsAuth, c.MetricsTLSCertFile, c.MetricsTLSKeyFile)
	}
	env := map[string]string{"TESSERA_METRICS_AUTH": "false"}
	if err := ApplyEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if c.MetricsAuth {
		t.Error("TESSERA_METRICS_AUTH=false left authentication on")
	}

	for _, tc := range []struct {
		name       string
		auth       bool
		cert, key  string
		wantErrHas string
	}{
		{name: "generated certificate", auth: true},
		{name: "given certificate", auth: true, cert: "/tls/tls.crt", key: "/tls/tls.key"},
		{name: "certificate without key", auth: true, cert: "/tls/tls.crt", wantErrHas: "give both or neither"},
		{name: "key without certificate", auth: true, key: "/tls/tls.key", wantErrHas: "give both or neither"},
		{name: "plain HTTP", auth: false},
		{name: "plain HTTP with a certificate", auth: false, cert: "/tls/tls.crt", key: "/tls/tls.key", wantErrHas: "--metrics-auth=false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Config{NodeName: "n", Partitioning: "static", Sharing: "none", MetricsAuth: tc.auth, MetricsTLSCertFile: tc.cert, MetricsTLSKeyFile: tc.key}
			err := c.Validate()
			if tc.wantErrHas == "" && err != nil {
				t.Errorf("Validate: %v", err)
			}
			if tc.wantErrHas != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErrHas)) {
				t.Errorf("Validate: %v, want an error with %q", err, tc.wantErrHas)
			}
		})
	}
}

// reviewingClient is an API server that accepts the token "scraper" as a
// user who may get /metrics and "tenant" as one who may not.
func reviewingClient() *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview).DeepCopy()
		switch tr.Spec.Token {
		case "scraper", "tenant":
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: tr.Spec.Token}}
		}
		return true, tr, nil
	})
	c.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview).DeepCopy()
		sar.Status.Allowed = sar.Spec.User == "scraper" && sar.Spec.NonResourceAttributes != nil &&
			*sar.Spec.NonResourceAttributes == authzv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}
		return true, sar, nil
	})
	return c
}

// TestServeMetricsAuth: the agent's port as --metrics-auth serves it:
// HTTPS with /metrics for the authorized scraper only and the probes'
// paths open, also over plain HTTP for the kubelet; with
// --metrics-auth=false plain HTTP open to all.
func TestServeMetricsAuth(t *testing.T) {
	type want struct {
		scheme, path, token string
		code                int
	}
	for _, tc := range []struct {
		name  string
		auth  bool
		wants []want
	}{
		{"on", true, []want{
			{"https", "/metrics", "", http.StatusUnauthorized},
			{"https", "/metrics", "forged", http.StatusUnauthorized},
			{"https", "/metrics", "tenant", http.StatusForbidden},
			{"https", "/metrics", "scraper", http.StatusOK},
			{"https", "/healthz", "", http.StatusOK},
			{"https", "/readyz", "", http.StatusServiceUnavailable}, // starting: no check set
			// The kubelet's probes stay plain HTTP; nothing else does.
			{"http", "/healthz", "", http.StatusOK},
			{"http", "/readyz", "", http.StatusServiceUnavailable},
			{"http", "/metrics", "scraper", http.StatusBadRequest},
		}},
		{"off", false, []want{
			{"http", "/metrics", "", http.StatusOK},
			{"http", "/healthz", "", http.StatusOK},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, tctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(tctx)
			defer cancel()
			l := freeAddr(t)
			c := &Config{NodeName: "n", MetricsAddress: l, MetricsAuth: tc.auth}
			if _, err := serveMetrics(ctx, c, reviewingClient(), false); err != nil {
				t.Fatal(err)
			}
			// The generated certificate is self-signed: verification is
			// skipped, as the chart's ServiceMonitor does.
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
			for _, w := range tc.wants {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, w.scheme+"://"+l+w.path, nil)
				if w.token != "" {
					req.Header.Set("Authorization", "Bearer "+w.token)
				}
				resp, err := hc.Do(req)
				if err != nil {
					t.Fatalf("GET %s: %v", w.path, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != w.code {
					t.Errorf("GET %s://%s with token %q: %s %q, want %d", w.scheme, w.path, w.token, resp.Status, body, w.code)
				}
				if w.path == "/metrics" && w.code == http.StatusOK && !strings.Contains(string(body), "tessera_prepared_claims") {
					t.Errorf("GET /metrics: no tessera metrics in %q", body)
				}
			}
		})
	}
}

// freeAddr is a loopback address free a moment ago (serveMetrics says
// nothing of the address it bound).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
