package metrics_test

import (
	"testing"

	"github.com/tessera-gpu/tessera/internal/metrics"
	"github.com/tessera-gpu/tessera/internal/metrics/metricstest"
	"github.com/tessera-gpu/tessera/internal/telemetry"
)

func sample(uuid string, kv map[telemetry.Field]float64) telemetry.Sample {
	s := telemetry.Sample{UUID: uuid}
	for f, v := range kv {
		s.Set(f, v)
	}
	return s
}

func TestTelemetryGauges(t *testing.T) {
	m := metrics.New()
	m.TelemetryPollFailed()
	m.TelemetryPollFailed()
	whole := sample("GPU-a", map[telemetry.Field]float64{
		telemetry.MemoryUsedBytes: 30 << 30, telemetry.MemoryTotalBytes: 80 << 30, telemetry.UtilizationPercent: 70,
		telemetry.TemperatureCelsius: 61.5, telemetry.PowerWatts: 511, telemetry.PowerLimitWatts: 700, telemetry.SMClockMHz: 1980,
	})
	mig := sample("MIG-b", map[telemetry.Field]float64{telemetry.MemoryUsedBytes: 1 << 30, telemetry.MemoryTotalBytes: 10 << 30})
	m.SetTelemetrySource(func() []metrics.DeviceTelemetry {
		return []metrics.DeviceTelemetry{
			{Node: "n1", Device: "gpu-0", UUID: "GPU-a", Namespace: "team-a", Pod: "train-0", Sample: whole},
			{Node: "n1", Device: "gpu-1-mig-1g-10gb-0", UUID: "MIG-b", Sample: mig},
			{Node: "n1", Device: "gpu-0", UUID: "GPU-a", Sample: mig}, // a repeat: dropped, not a failed scrape
		}
	})
	s := metricstest.Scrape(t, m.Handler())
	gpu0 := []string{"node", "n1", "device", "gpu-0", "uuid", "GPU-a", "namespace", "team-a", "pod", "train-0"}
	mig0 := []string{"device", "gpu-1-mig-1g-10gb-0", "uuid", "MIG-b", "namespace", "", "pod", ""}
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"tessera_gpu_memory_used_bytes", gpu0, 30 << 30},
		{"tessera_gpu_memory_total_bytes", gpu0, 80 << 30},
		{"tessera_gpu_utilization_ratio", gpu0, 0.7},
		{"tessera_gpu_temperature_celsius", gpu0, 61.5},
		{"tessera_gpu_power_watts", gpu0, 511},
		{"tessera_gpu_power_limit_watts", gpu0, 700},
		{"tessera_gpu_sm_clock_hertz", gpu0, 1980e6},
		{"tessera_gpu_memory_used_bytes", mig0, 1 << 30},
		{"tessera_gpu_memory_total_bytes", mig0, 10 << 30},
		{"tessera_telemetry_poll_failures_total", nil, 2},
	}
	for _, c := range checks {
		if !s.Has(c.name, c.labels...) {
			t.Errorf("%s%v missing", c.name, c.labels)
			continue
		}
		if got := s.Value(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// Unknown fields have no series; the repeat added none.
	for _, name := range []string{"tessera_gpu_utilization_ratio", "tessera_gpu_power_watts", "tessera_gpu_temperature_celsius"} {
		if s.Has(name, "uuid", "MIG-b") {
			t.Errorf("%s exported for a MIG device that does not report it", name)
		}
	}
	if n := len(s["tessera_gpu_memory_used_bytes"].GetMetric()); n != 2 {
		t.Errorf("%d memory series, want one per device (2)", n)
	}

	// No source: no series, and the failure counter still there at 0.
	s = metricstest.Scrape(t, metrics.New().Handler())
	if _, ok := s["tessera_gpu_memory_used_bytes"]; ok {
		t.Error("telemetry series without a source")
	}
	if !s.Has("tessera_telemetry_poll_failures_total") {
		t.Error("tessera_telemetry_poll_failures_total missing before any failure")
	}
}

func TestNilMetricsTelemetry(t *testing.T) {
	var m *metrics.Metrics
	m.SetTelemetrySource(nil)
	m.TelemetryPollFailed()
}
