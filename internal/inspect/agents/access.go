package agents

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/tessera-gpu/tessera/internal/names"
)

// MetricsScheme is the scheme the agent pod serves /metrics with: https
// where the agent authenticates it (the chart's TESSERA_METRICS_AUTH, true
// by default), http where it does not, and for agents of charts before
// metrics.auth, which do not say. (/readyz answers either way: the probes
// are plain HTTP.)
func MetricsScheme(p *corev1.Pod) string {
	for _, c := range p.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == "TESSERA_METRICS_AUTH" && e.ValueFrom == nil {
				if strings.EqualFold(strings.TrimSpace(e.Value), "false") {
					return "http"
				}
				return "https"
			}
		}
	}
	return "http"
}

// BearerToken is the bearer token cfg's credentials send the API server
// (a token, a token file, an exec plugin's or an auth provider's), "" when
// they send none (a client certificate). It is read by running a request
// through client-go's own authentication wrappers, so every kind of
// kubeconfig credential yields its token exactly as kubectl would send it.
func BearerToken(cfg *rest.Config) (string, error) {
	var token string
	rt, err := rest.HTTPWrappersForConfig(cfg, roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if scheme, t, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "bearer") {
			token = t
		}
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
	}))
	if err != nil {
		return "", fmt.Errorf("read your credentials' token: %w", err)
	}
	req, err := http.NewRequest(http.MethodGet, "https://agents.invalid/", nil)
	if err != nil {
		return "", err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return "", fmt.Errorf("read your credentials' token: %w", err)
	}
	resp.Body.Close()
	return token, nil
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// ReadTokenFile reads a bearer token from path (a --metrics-token-file).
func ReadTokenFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--metrics-token-file: %w", err)
	}
	t := strings.TrimSpace(string(data))
	if t == "" {
		return "", fmt.Errorf("--metrics-token-file %s is empty", path)
	}
	return t, nil
}

// HTTPClient asks --metrics-url agents, verifying their certificates
// against the PEM CAs in caFile; with caFile empty, the default client
// (the system's roots). There is no option to skip verification: a token
// sent to a server nobody verified is a token given away.
func HTTPClient(caFile string) (*http.Client, error) {
	if caFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--metrics-ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--metrics-ca-file %s holds no PEM certificate", caFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr}, nil
}

// authorize adds token to a request to an agent: as Authorization for one
// the agent reads directly, and as names.ForwardedAuthorizationHeader too,
// which the API server's proxy passes on after consuming Authorization.
// Only over HTTPS: a token sent in clear text on the pod network is one
// anyone listening can replay.
func authorize(h http.Header, scheme, token string) {
	if token == "" || scheme != "https" {
		return
	}
	h.Set("Authorization", "Bearer "+token)
	h.Set(names.ForwardedAuthorizationHeader, "Bearer "+token)
}
