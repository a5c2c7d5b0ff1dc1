package driver

import (
	"fmt"
	"testing"
	"time"

	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/metrics"
	"github.com/tessera-gpu/tessera/internal/metrics/metricstest"
)

// TestMetricsOverGRPC prepares and unprepares claims through the agent's
// kubelet socket and checks what a Prometheus scrape of the handler sees.
func TestMetricsOverGRPC(t *testing.T) {
	n := newMetricsNode(t, "dgx-h100")
	scrape := func() metricstest.Snapshot { return metricstest.Scrape(t, n.metrics.Handler()) }

	s := scrape()
	if got := s.Value("tessera_published_devices", "vendor", "nvidia", "model", "H100", "type", "gpu"); got != 8 {
		t.Errorf("published H100 GPUs: %v, want 8", got)
	}

	// Three claims in one call, each timed on its own.
	var ok []*drapbv1.Claim
	for i, devs := range [][]string{{"gpu-0"}, {"gpu-1"}, {"gpu-2", "gpu-3"}} {
		ok = append(ok, n.addClaim(fmt.Sprintf("ok-%d", i), devs...))
	}
	resp := n.prepare(ok...)
	for _, c := range ok {
		if e := resp.Claims[c.Uid].GetError(); e != "" {
			t.Fatalf("prepare %s: %s", c.Name, e)
		}
	}
	ghost := n.addClaim("ghost", "gpu-42")
	thief := n.addClaim("thief", "gpu-0")
	resp = n.prepare(ghost, thief)
	if resp.Claims[ghost.Uid].GetError() == "" || resp.Claims[thief.Uid].GetError() == "" {
		t.Fatalf("bad claims prepared: %v", resp)
	}

	s = scrape()
	expect(t, "prepare successes", float64(s.Count("tessera_prepare_duration_seconds", "result", "success")), 3)
	expect(t, "prepare failures", float64(s.Count("tessera_prepare_duration_seconds", "result", "error")), 2)
	expect(t, "device_not_on_node", s.Value("tessera_prepare_errors_total", "reason", metrics.ReasonDeviceNotOnNode), 1)
	expect(t, "device_in_use", s.Value("tessera_prepare_errors_total", "reason", metrics.ReasonDeviceInUse), 1)
	expect(t, "other", s.Value("tessera_prepare_errors_total", "reason", metrics.ReasonOther), 0)
	claims, devices := completed(n)
	expect(t, "prepared claims", s.Value("tessera_prepared_claims"), float64(claims))
	expect(t, "prepared devices", s.Value("tessera_prepared_devices"), float64(devices))
	if claims != 3 || devices != 4 {
		t.Errorf("Prepared() holds %d claims with %d devices, want 3 and 4", claims, devices)
	}

	un := n.unprepare(ok[2])
	if e := un.Claims[ok[2].Uid].GetError(); e != "" {
		t.Fatal(e)
	}
	s = scrape()
	expect(t, "unprepare successes", float64(s.Count("tessera_unprepare_duration_seconds", "result", "success")), 1)
	claims, devices = completed(n)
	expect(t, "prepared claims after unprepare", s.Value("tessera_prepared_claims"), float64(claims))
	expect(t, "prepared devices after unprepare", s.Value("tessera_prepared_devices"), float64(devices))

	// A restarted agent (new process, new metrics) reads the gauges from
	// the checkpoint; the histograms start again.
	n.stop()
	n.metrics = metrics.New()
	n.start()
	s = scrape()
	expect(t, "prepared claims after restart", s.Value("tessera_prepared_claims"), 2)
	expect(t, "prepared devices after restart", s.Value("tessera_prepared_devices"), 2)
	expect(t, "prepares after restart", float64(s.Count("tessera_prepare_duration_seconds", "result", "success")), 0)
}

func TestHealthEventsCounted(t *testing.T) {
	n := newMetricsNode(t, "t4-2")
	uuid := n.driver.Published().Devices["gpu-1"].GPU.UUID
	// The backend's watch may not be running yet, and an event sent before
	// it is lost: send until one is counted.
	waitFor(t, func() bool {
		n.backend.InjectHealth(healthEvent(uuid))
		time.Sleep(20 * time.Millisecond)
		return metricstest.Scrape(t, n.metrics.Handler()).Value("tessera_health_events_total", "kind", "xid", "code", "79") >= 1
	})
}

// completed counts the claims the node's checkpoint holds in state
// PrepareCompleted, and their devices.
func completed(n *node) (claims, devices int) {
	for _, c := range n.checkpointClaims() {
		if c.State == checkpoint.PrepareCompleted {
			claims++
			devices += len(c.Devices)
		}
	}
	return claims, devices
}

func expect(t *testing.T, what string, got, want float64) {
	t.Helper()
	if got != want {
		t.Errorf("%s: %v, want %v", what, got, want)
	}
}
