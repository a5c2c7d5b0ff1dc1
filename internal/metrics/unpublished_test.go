package metrics_test

import (
	"testing"

	"github.com/tessera-gpu/tessera/internal/metrics"
	"github.com/tessera-gpu/tessera/internal/metrics/metricstest"
)

// TestUnpublishedAndUnknownValues: GPUs that publish no device and
// published GPUs with an unknown value are two gauges; every series exists
// from the start, and a later discovery's counts replace the earlier ones.
func TestUnpublishedAndUnknownValues(t *testing.T) {
	m := metrics.New()
	s := metricstest.Scrape(t, m.Handler())
	for _, r := range metrics.UnpublishedReasons {
		if !s.Has("tessera_gpus_unpublished", "reason", r) {
			t.Errorf("no tessera_gpus_unpublished series for reason %s", r)
		}
	}
	for _, v := range metrics.UnknownValues {
		if !s.Has("tessera_gpu_values_unknown", "value", v) {
			t.Errorf("no tessera_gpu_values_unknown series for value %s", v)
		}
	}
	m.SetUnpublished(map[string]int{"ambiguous": 2})
	m.SetUnknownValues(map[string]int{"memory": 1, "fabricBandwidthGBps": 8})
	m.SetUnknownValues(map[string]int{"fabricBandwidthGBps": 8, "model": 1})
	s = metricstest.Scrape(t, m.Handler())
	for _, c := range []struct {
		got, want float64
		what      string
	}{
		{s.Value("tessera_gpus_unpublished", "reason", "ambiguous"), 2, "ambiguous GPUs"},
		{s.Value("tessera_gpus_unpublished", "reason", "lost"), 0, "lost GPUs"},
		{s.Value("tessera_gpu_values_unknown", "value", "memory"), 0, "memory, gone back to 0"},
		{s.Value("tessera_gpu_values_unknown", "value", "fabricBandwidthGBps"), 8, "fabric bandwidth"},
		{s.Value("tessera_gpu_values_unknown", "value", "model"), 1, "model"},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
}
