package metrics

// MemorySlices is one dynamically partitioned GPU's free memory slices and
// those of them no published profile can use now.
type MemorySlices struct{ Free, Unusable int }

// SetMemorySlices replaces the dynamic GPUs' memory slice gauges (by GPU
// device name); a GPU no longer dynamic loses its series.
func (m *Metrics) SetMemorySlices(gpus map[string]MemorySlices) {
	if m == nil {
		return
	}
	// As SetPublished: one partial scrape at most, at a republish.
	m.freeSlices.Reset()
	m.unusableSlices.Reset()
	for dev, s := range gpus {
		m.freeSlices.WithLabelValues(dev).Set(float64(s.Free))
		m.unusableSlices.WithLabelValues(dev).Set(float64(s.Unusable))
	}
}
