package agent

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestMetricsAddressFlag(t *testing.T) {
	var c Config
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	c.AddFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if c.MetricsAddress != DefaultMetricsAddress {
		t.Errorf("default %q", c.MetricsAddress)
	}
	env := map[string]string{"TESSERA_METRICS_ADDRESS": "127.0.0.1:9999"}
	if err := ApplyEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if c.MetricsAddress != "127.0.0.1:9999" {
		t.Errorf("from environment: %q", c.MetricsAddress)
	}
}

func TestServeMetrics(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Plain HTTP here: metricsauth_test.go serves the guarded port.
	at := func(addr string) *Config { return &Config{MetricsAddress: addr} }
	if m, err := serveMetrics(ctx, at(""), nil, false); m != nil || err != nil {
		t.Errorf("empty address: %v, %v; want no metrics", m, err)
	}
	if m, err := serveMetrics(ctx, at("127.0.0.1:0"), nil, false); m == nil || err != nil {
		t.Errorf("free port: %v, %v", m, err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	if _, err := serveMetrics(ctx, at(taken.Addr().String()), nil, false); err == nil || !strings.Contains(err.Error(), "--metrics-address") {
		t.Errorf("port in use: %v", err)
	}
	// In a handover the port is the agent's before this one (host
	// network): taken once that one lets it go.
	m, err := serveMetrics(ctx, at(taken.Addr().String()), nil, true)
	if err != nil || m == nil {
		t.Fatalf("port in use in a handover: %v, %v", m, err)
	}
	taken.Close()
	var served error
	for range 100 {
		var resp *http.Response
		if resp, served = http.Get("http://" + taken.Addr().String() + "/healthz"); served == nil {
			resp.Body.Close()
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if served != nil {
		t.Errorf("the port let go was not served: %v", served)
	}
}

// TestProfilingLoopbackOnly: pprof has no authentication, so --profiling
// serves it only on a loopback address, never beside the metrics.
func TestProfilingLoopbackOnly(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{DefaultProfilingAddress, true},
		{"127.0.0.1:0", true},
		{"[::1]:9479", true},
		{"localhost:9479", true},
		{":9479", false},
		{"0.0.0.0:9479", false},
		{"10.0.0.5:9479", false},
		{"9479", false},
	} {
		c := &Config{NodeName: "n", Partitioning: "static", Sharing: "none", Profiling: true, ProfilingAddress: tc.addr}
		err := c.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("--profiling-address=%s: %v, want ok %v", tc.addr, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "--profiling-address") {
			t.Errorf("--profiling-address=%s: %v does not name the flag", tc.addr, err)
		}
	}
	// Off, the address is not checked.
	c := &Config{NodeName: "n", Partitioning: "static", Sharing: "none", ProfilingAddress: ":9479"}
	if err := c.Validate(); err != nil {
		t.Errorf("without --profiling: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := serveProfiling(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + a.String() + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/debug/pprof/ on %s: %s", a, resp.Status)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	if _, err := serveProfiling(ctx, taken.Addr().String()); err == nil || !strings.Contains(err.Error(), "--profiling-address") {
		t.Errorf("profiling port in use: %v", err)
	}
}
