package driver

import (
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/internal/metrics"
	"github.com/tessera-gpu/tessera/internal/metrics/metricstest"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// TestMemorySliceMetrics: every dynamic GPU exports its free memory slices
// (8 of an idle H100) and none unusable; a partition carved at prepare
// takes its slice from its GPU's count once the agent republishes.
func TestMemorySliceMetrics(t *testing.T) {
	n := launch(t, &node{profile: "dgx-h100", partitioning: publish.Dynamic, metrics: metrics.New()})
	s := metricstest.Scrape(t, n.metrics.Handler())
	for i := range 8 {
		expect(t, names.GPU(i)+" free", s.Value("tessera_mig_free_memory_slices", "device", names.GPU(i)), 8)
		expect(t, names.GPU(i)+" unusable", s.Value("tessera_mig_unusable_memory_slices", "device", names.GPU(i)), 0)
	}
	pub := n.driver.Published()
	var placement string
	for _, name := range pub.Order {
		if e := pub.Devices[name]; e.Carve != nil && e.Carve.Profile == "1g.10gb" {
			placement = name
			break
		}
	}
	if r := n.prepare(n.addClaim("small", placement)); r.Claims["uid-small"].GetError() != "" {
		t.Fatal(r.Claims["uid-small"].GetError())
	}
	gpu, _ := names.ParentGPU(placement)
	deadline := time.Now().Add(10 * time.Second)
	for {
		s = metricstest.Scrape(t, n.metrics.Handler())
		if s.Value("tessera_mig_free_memory_slices", "device", gpu) == 7 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	expect(t, gpu+" free after a 1g.10gb", s.Value("tessera_mig_free_memory_slices", "device", gpu), 7)
	expect(t, gpu+" unusable after a 1g.10gb", s.Value("tessera_mig_unusable_memory_slices", "device", gpu), 0)
}
