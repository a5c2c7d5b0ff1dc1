package metrics

import "github.com/prometheus/client_golang/prometheus"

// Why a GPU the backend found publishes no device, the `reason` label of
// tessera_gpus_unpublished (inventory.UnpublishedReason); every series
// exists from the start, at 0.
var UnpublishedReasons = []string{"lost", "unreadable", "no-partition-profiles", "ambiguous"}

func newUnpublished() *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "gpus_unpublished",
		Help: "GPUs the backend found that publish no device, by reason: lost (fell off the bus before it could be named), unreadable (its identity could not be read), no-partition-profiles (MIG on, no profile reported), ambiguous (two GPUs the backend cannot tell apart, neither published). The agent's log says which GPU, once.",
	}, []string{labelReason})
	for _, r := range UnpublishedReasons {
		g.WithLabelValues(r)
	}
	return g
}

// SetUnpublished sets the unpublished GPUs of the last discovery, by
// reason; reasons not in counts go back to 0.
func (m *Metrics) SetUnpublished(counts map[string]int) {
	if m == nil {
		return
	}
	for _, r := range UnpublishedReasons {
		m.unpublished.WithLabelValues(r).Set(float64(counts[r]))
	}
	for r, n := range counts {
		m.unpublished.WithLabelValues(r).Set(float64(n))
	}
}

// UnknownValues are the values of a published GPU a backend may be unable
// to read, the `value` label of tessera_gpu_values_unknown
// (inventory.Unpublished.Value); every series exists from the start, at 0.
var UnknownValues = []string{"memory", "computeUnits", "fabricBandwidthGBps", "model", "gfxVersion"}

func newUnknownValues() *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "gpu_values_unknown",
		Help: "Published GPUs with a value the backend could not read, by value: memory, computeUnits and fabricBandwidthGBps are left out of their devices rather than published as 0, gfxVersion (AMD) is left out with the architecture that follows from it, model is published as \"unknown\". The agent's log says which GPU and why, once.",
	}, []string{"value"})
	for _, v := range UnknownValues {
		g.WithLabelValues(v)
	}
	return g
}

// SetUnknownValues sets the published GPUs of the last discovery with an
// unknown value, by value; values not in counts go back to 0.
func (m *Metrics) SetUnknownValues(counts map[string]int) {
	if m == nil {
		return
	}
	for _, v := range UnknownValues {
		m.unknownValues.WithLabelValues(v).Set(float64(counts[v]))
	}
	for v, n := range counts {
		m.unknownValues.WithLabelValues(v).Set(float64(n))
	}
}
