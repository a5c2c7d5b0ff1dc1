package metrics_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/internal/metrics"
	"github.com/tessera-gpu/tessera/internal/metrics/auth"
)

// TestListenTLS: with TLS the port serves everything over HTTPS and, over
// plain HTTP, only the probes' paths, so that a kubelet's plain HTTP probe
// works against an agent of either kind; and a client that never speaks
// holds up no other.
func TestListenTLS(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cert, err := auth.SelfSigned([]string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	addr, err := metrics.ListenTLS(ctx, "127.0.0.1:0", metrics.New().Handler(), &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	// Open and silent, through every request below.
	silent, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 5 * time.Second}
	for _, tc := range []struct {
		scheme, path string
		want         int
		bodyHas      string
	}{
		{"https", "/metrics", http.StatusOK, "tessera_prepared_claims"},
		{"https", "/healthz", http.StatusOK, "ok"},
		{"https", "/readyz", http.StatusServiceUnavailable, "starting"},
		{"http", "/healthz", http.StatusOK, "ok"},
		{"http", "/readyz", http.StatusServiceUnavailable, "starting"},
		{"http", "/metrics", http.StatusBadRequest, "over HTTPS only"},
		{"http", "/debug/pprof/", http.StatusBadRequest, "over HTTPS only"},
	} {
		resp, err := hc.Get(tc.scheme + "://" + addr.String() + tc.path)
		if err != nil {
			t.Errorf("%s %s: %v", tc.scheme, tc.path, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want || !strings.Contains(string(body), tc.bodyHas) {
			t.Errorf("%s %s: %s %q, want %d with %q", tc.scheme, tc.path, resp.Status, body, tc.want, tc.bodyHas)
		}
		if tc.scheme == "http" && strings.Contains(string(body), "tessera_") {
			t.Errorf("http %s: metrics over plain HTTP", tc.path)
		}
	}
}
