// Package metricstest scrapes a /metrics handler the way Prometheus does
// (HTTP, text exposition format) and reads values out of the result, so tests
// check what a scraper would see rather than the collectors' internals.
package metricstest

import (
	"net/http"
	"net/http/httptest"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Snapshot is one parsed scrape.
type Snapshot map[string]*dto.MetricFamily

// Scrape GETs /metrics from h and parses the text format.
func Scrape(t testing.TB, h http.Handler) Snapshot {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse scrape: %v", err)
	}
	return Snapshot(fams)
}

// find returns the series of name whose labels include all of labels
// (name, value pairs), or nil.
func (s Snapshot) find(name string, labels ...string) *dto.Metric {
	f, ok := s[name]
	if !ok {
		return nil
	}
next:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			if !hasLabel(m, labels[i], labels[i+1]) {
				continue next
			}
		}
		return m
	}
	return nil
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue() == value
		}
	}
	return false
}

// Value is a counter's or gauge's value; 0 when the series is absent.
func (s Snapshot) Value(name string, labels ...string) float64 {
	m := s.find(name, labels...)
	switch {
	case m == nil:
		return 0
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

// Count is a histogram's sample count; 0 when the series is absent.
func (s Snapshot) Count(name string, labels ...string) uint64 {
	m := s.find(name, labels...)
	if m == nil || m.Histogram == nil {
		return 0
	}
	return m.Histogram.GetSampleCount()
}

// Has reports whether a series of name with labels exists.
func (s Snapshot) Has(name string, labels ...string) bool { return s.find(name, labels...) != nil }
