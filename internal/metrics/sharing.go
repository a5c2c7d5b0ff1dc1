package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// SharingFunc returns, for the prepared claims, how many use each sharing
// strategy ("" for none: the GPU's native time-slicing) and how many MPS
// daemons they hold.
type SharingFunc func() (byStrategy map[string]int, mpsDaemons int)

// Strategies are the `strategy` label values of tessera_prepared_claims_by_sharing;
// they exist from the start so dashboards see 0, not "no data".
var Strategies = []string{"None", "TimeSlicing", "MPS"}

// sharingCollector reads the sharing gauges from the checkpoint at scrape
// time, like the prepared gauges, so they are right after a restart.
type sharingCollector struct {
	claims, daemons *prometheus.Desc

	mu  sync.Mutex
	src SharingFunc
}

func newSharingCollector() *sharingCollector {
	return &sharingCollector{
		claims:  prometheus.NewDesc(namespace+"_prepared_claims_by_sharing", "Prepared ResourceClaims by the sharing strategy of their devices (None: no sharing config, the GPU's native time-slicing). A claim with devices of two strategies counts under both.", []string{"strategy"}, nil),
		daemons: prometheus.NewDesc(namespace+"_mps_daemons", "MPS control daemons held by prepared claims on this node (one per claim that configures MPS, one per device with capacity shares).", nil, nil),
	}
}

func (c *sharingCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.claims
	ch <- c.daemons
}

func (c *sharingCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	src := c.src
	c.mu.Unlock()
	by, daemons := map[string]int{}, 0
	if src != nil {
		by, daemons = src()
	}
	for _, s := range Strategies {
		n := by[s]
		if s == "None" {
			n = by[""]
		}
		ch <- prometheus.MustNewConstMetric(c.claims, prometheus.GaugeValue, float64(n), s)
	}
	ch <- prometheus.MustNewConstMetric(c.daemons, prometheus.GaugeValue, float64(daemons))
}

// SetSharingSource sets where the sharing gauges are read from.
func (m *Metrics) SetSharingSource(f SharingFunc) {
	if m == nil {
		return
	}
	m.sharing.mu.Lock()
	m.sharing.src = f
	m.sharing.mu.Unlock()
}

// MPSRestarted counts MPS daemons of prepared claims found dead and started
// again.
func (m *Metrics) MPSRestarted(n int) {
	if m == nil {
		return
	}
	m.mpsRestarts.Add(float64(n))
}
