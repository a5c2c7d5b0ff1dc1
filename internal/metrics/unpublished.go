package metrics

import "github.com/prometheus/client_golang/prometheus"

// Why a GPU the backend found publishes no device, the `reason` label of
// tessera_gpus_unpublished (inventory.UnpublishedReason); every series
// exists from the start, at 0.
var UnpublishedReasons = []string{"lost", "unreadable", "no-partition-profiles"}

func newUnpublished() *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "gpus_unpublished",
		Help: "GPUs the backend found that publish no device, by reason: lost (fell off the bus before it could be named), unreadable (its identity could not be read), no-partition-profiles (MIG on, no profile reported). The agent's log says which GPU, once.",
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
