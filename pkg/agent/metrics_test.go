package agent

import (
	"context"
	"net"
	"strings"
	"testing"

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
	if m, err := serveMetrics(ctx, "", false); m != nil || err != nil {
		t.Errorf("empty address: %v, %v; want no metrics", m, err)
	}
	if m, err := serveMetrics(ctx, "127.0.0.1:0", false); m == nil || err != nil {
		t.Errorf("free port: %v, %v", m, err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	if _, err := serveMetrics(ctx, taken.Addr().String(), false); err == nil || !strings.Contains(err.Error(), "--metrics-address") {
		t.Errorf("port in use: %v", err)
	}
}
