package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/internal/metrics"
	"github.com/tessera-gpu/tessera/internal/metrics/metricstest"
)

func TestRecordAndScrape(t *testing.T) {
	m := metrics.New()
	for range 3 {
		m.ObservePrepare(2*time.Millisecond, "")
	}
	m.ObservePrepare(time.Millisecond, metrics.ReasonDeviceNotOnNode)
	m.ObservePrepare(time.Millisecond, "made-up") // folded into other
	m.ObserveUnprepare(time.Millisecond, "")
	m.ObserveUnprepare(time.Millisecond, metrics.ReasonCDIWrite)
	m.ObservePartition(metrics.OpDestroy, 20*time.Millisecond, nil)
	m.ObservePartition(metrics.OpCarve, time.Second, errors.New("busy"))
	m.HealthEvent("xid", "79")
	m.HealthEvent("xid", "79")
	m.HealthEvent("", "")
	m.SetPublished(map[metrics.DeviceKey]int{{"nvidia", "H100", metrics.TypeGPU}: 8, {"amd", "MI300X", metrics.TypePartition}: 64})
	m.SetPreparedSource(func() (int, int) { return 2, 5 })
	m.StaleClaimReleased(metrics.ReleasedDeleted)
	m.StaleClaimReleased(metrics.ReleasedDeleted)
	m.StaleClaimReleased("made-up") // not counted

	s := metricstest.Scrape(t, m.Handler())
	checks := []struct {
		got, want float64
		what      string
	}{
		{float64(s.Count("tessera_prepare_duration_seconds", "result", "success")), 3, "prepare successes"},
		{float64(s.Count("tessera_prepare_duration_seconds", "result", "error")), 2, "prepare errors"},
		{s.Value("tessera_prepare_errors_total", "reason", "device_not_on_node"), 1, "device_not_on_node"},
		{s.Value("tessera_prepare_errors_total", "reason", "other"), 1, "unknown reason as other"},
		{s.Value("tessera_prepare_errors_total", "reason", "checkpoint"), 0, "checkpoint"},
		{float64(s.Count("tessera_unprepare_duration_seconds", "result", "success")), 1, "unprepare successes"},
		{s.Value("tessera_unprepare_errors_total", "reason", "cdi_write"), 1, "unprepare cdi_write"},
		{float64(s.Count("tessera_partition_operation_duration_seconds", "operation", "destroy", "result", "success")), 1, "destroy"},
		{float64(s.Count("tessera_partition_operation_duration_seconds", "operation", "carve", "result", "error")), 1, "carve error"},
		{s.Value("tessera_health_events_total", "kind", "xid", "code", "79"), 2, "xid events"},
		{s.Value("tessera_health_events_total", "kind", "unknown", "code", ""), 1, "unlabelled event"},
		{s.Value("tessera_published_devices", "vendor", "nvidia", "model", "H100", "type", "gpu"), 8, "H100s"},
		{s.Value("tessera_published_devices", "vendor", "amd", "model", "MI300X", "type", "partition"), 64, "MI300X partitions"},
		{s.Value("tessera_prepared_claims"), 2, "prepared claims"},
		{s.Value("tessera_prepared_devices"), 5, "prepared devices"},
		{s.Value("tessera_stale_claims_released_total", "evidence", "deleted"), 2, "stale claims released, deleted"},
		{s.Value("tessera_stale_claims_released_total", "evidence", "deallocated"), 0, "stale claims released, deallocated"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
	// Every reason exists from the start, at zero.
	for _, r := range metrics.Reasons {
		if !s.Has("tessera_prepare_errors_total", "reason", r) || !s.Has("tessera_unprepare_errors_total", "reason", r) {
			t.Errorf("no error series for reason %s", r)
		}
	}
	for _, e := range metrics.Released {
		if !s.Has("tessera_stale_claims_released_total", "evidence", e) {
			t.Errorf("no released series for evidence %s", e)
		}
	}
	if s.Has("tessera_stale_claims_released_total", "evidence", "made-up") {
		t.Error("an unknown evidence got a series")
	}
	for _, f := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if _, ok := s[f]; !ok {
			t.Errorf("%s missing: Go and process collectors are not registered", f)
		}
	}

	// A republish drops series of devices no longer there.
	m.SetPublished(map[metrics.DeviceKey]int{{"nvidia", "H100", metrics.TypeGPU}: 7})
	s = metricstest.Scrape(t, m.Handler())
	if s.Has("tessera_published_devices", "model", "MI300X") || s.Value("tessera_published_devices", "model", "H100") != 7 {
		t.Errorf("published after republish: %v", s["tessera_published_devices"])
	}
}

func TestNilMetricsIsANoOp(t *testing.T) {
	var m *metrics.Metrics
	m.ObservePrepare(time.Second, "")
	m.ObserveUnprepare(time.Second, metrics.ReasonOther)
	m.ObservePartition(metrics.OpCarve, time.Second, nil)
	m.HealthEvent("xid", "79")
	m.SetPublished(nil)
	m.SetPreparedSource(nil)
}

func TestRegistriesAreIndependent(t *testing.T) {
	a, b := metrics.New(), metrics.New()
	a.ObservePrepare(time.Millisecond, "")
	if n := metricstest.Scrape(t, b.Handler()).Count("tessera_prepare_duration_seconds", "result", "success"); n != 0 {
		t.Errorf("a's prepare shows in b: %d", n)
	}
}

func TestListenServesAndShutsDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	m := metrics.New()
	addr, err := metrics.Listen(ctx, "127.0.0.1:0", m.Handler())
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"/healthz": "ok", "/metrics": "tessera_prepared_claims 0"} {
		body := get(t, "http://"+addr.String()+path)
		if !strings.Contains(body, want) {
			t.Errorf("%s: %q lacks %q", path, body, want)
		}
	}
	// The port is taken: a second agent on it fails to start.
	if _, err := metrics.Listen(ctx, addr.String(), m.Handler()); err == nil || !strings.Contains(err.Error(), addr.String()) {
		t.Errorf("second listener on %s: %v", addr, err)
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := http.Get("http://" + addr.String() + "/healthz")
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("metrics server still serving after its context ended")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReadyz(t *testing.T) {
	m := metrics.New()
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get(); code != 503 || !strings.Contains(body, "starting") {
		t.Errorf("before a check is set: %d %q", code, body)
	}
	m.SetReadiness(func(context.Context) error { return errors.New("not registered with the kubelet yet") })
	if code, body := get(); code != 503 || !strings.Contains(body, "not registered") {
		t.Errorf("failing check: %d %q", code, body)
	}
	m.SetReadiness(func(context.Context) error { return nil })
	if code, body := get(); code != 200 || body != "ok\n" {
		t.Errorf("passing check: %d %q", code, body)
	}
	var nilMetrics *metrics.Metrics
	nilMetrics.SetReadiness(nil) // no metrics, no panic
}

// TestProfilingHandler: --profiling's handler serves Go's pprof, and the
// metrics handler never does.
func TestProfilingHandler(t *testing.T) {
	m := metrics.New()
	get := func(h http.Handler, path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	h := metrics.ProfilingHandler()
	if code, body := get(h, "/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("/debug/pprof/: %d %.80q", code, body)
	}
	if code, body := get(h, "/debug/pprof/goroutine?debug=1"); code != 200 || !strings.Contains(body, "goroutine profile") {
		t.Errorf("goroutine profile: %d %.80q", code, body)
	}
	if code, _ := get(h, "/metrics"); code != 404 {
		t.Errorf("/metrics on the profiling handler: %d, want 404", code)
	}
	if code, _ := get(m.Handler(), "/debug/pprof/"); code != 404 {
		t.Errorf("/debug/pprof/ on the metrics handler: %d, want 404", code)
	}
}
