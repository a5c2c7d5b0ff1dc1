package telemetry

import (
	"context"
	"testing"

	"k8s.io/klog/v2/ktesting"
)

func sample(uuid string, util float64) Sample {
	s := Sample{UUID: uuid}
	s.Set(UtilizationPercent, util)
	return s
}

// NewPoller polls the reader it is given, on DefaultInterval unless told
// otherwise; what a failed poll keeps is internal/poll's (its tests).
func TestNewPoller(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	failed := 0
	p := NewPoller(func(context.Context) ([]Sample, error) { return []Sample{sample("GPU-a", 70)}, nil }, 0, func() { failed++ })
	if p.Interval != DefaultInterval {
		t.Errorf("interval %v, want %v", p.Interval, DefaultInterval)
	}
	if got := p.Current(); got != nil {
		t.Errorf("before a poll: %v", got)
	}
	p.Poll(ctx)
	got := p.Current()
	if len(got) != 1 || got[0].UUID != "GPU-a" {
		t.Fatalf("after a poll: %v", got)
	}
	if v, ok := got[0].Get(UtilizationPercent); !ok || v != 70 || failed != 0 {
		t.Errorf("utilization %v (%v), %d failures", v, ok, failed)
	}
}
