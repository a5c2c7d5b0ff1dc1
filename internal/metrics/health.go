package metrics

// TaintKey is one tessera_gpu_taints series.
type TaintKey struct{ Key, Effect string }

// SetHealth replaces the health gauges: GPUs per taint key and effect, and
// the number of GPUs reported Unhealthy.
func (m *Metrics) SetHealth(taints map[TaintKey]int, unhealthy int) {
	if m == nil {
		return
	}
	m.taints.Reset()
	for k, n := range taints {
		m.taints.WithLabelValues(k.Key, k.Effect).Set(float64(n))
	}
	m.unhealthy.Set(float64(unhealthy))
}

// SetIMEXReady sets whether the node's IMEX daemon, of domain, answered
// READY when last asked.
func (m *Metrics) SetIMEXReady(domain string, ready bool) {
	if m == nil {
		return
	}
	v := 0.0
	if ready {
		v = 1
	}
	m.imexReady.Reset()
	m.imexReady.WithLabelValues(domain).Set(v)
}

// ClearIMEXReady removes the gauge: the node runs no IMEX daemon, by
// design (the agent runs it only while a claim holds a channel).
func (m *Metrics) ClearIMEXReady() {
	if m == nil {
		return
	}
	m.imexReady.Reset()
}
