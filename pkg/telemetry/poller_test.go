package telemetry

import (
	"context"
	"errors"
	"testing"

	"k8s.io/klog/v2/ktesting"
)

// script is a Read that answers from a list, one entry per call.
type script struct {
	answers []answer
	calls   int
}

type answer struct {
	samples []Sample
	err     error
}

func (s *script) read(context.Context) ([]Sample, error) {
	a := s.answers[s.calls]
	s.calls++
	return a.samples, a.err
}

func sample(uuid string, util float64) Sample {
	s := Sample{UUID: uuid}
	s.Set(UtilizationPercent, util)
	return s
}

func TestPollerKeepsLastForAFewFailures(t *testing.T) {
	fail := answer{err: errors.New("nvml: busy")}
	steps := []struct {
		answer answer
		want   string  // UUID of the snapshot's one sample; "" for no snapshot
		util   float64 // its utilization
		failed uint64
	}{
		{answer{samples: []Sample{sample("GPU-a", 10)}}, "GPU-a", 10, 0},
		{fail, "GPU-a", 10, 1},
		{fail, "GPU-a", 10, 2},
		{fail, "", 0, 3},
		{answer{samples: []Sample{sample("GPU-a", 70)}}, "GPU-a", 70, 3},
		{fail, "GPU-a", 70, 4}, // a good poll restarts the count
	}
	s := &script{}
	for _, st := range steps {
		s.answers = append(s.answers, st.answer)
	}
	var counted uint64
	p := &Poller{Read: s.read, Failed: func() { counted++ }}
	_, ctx := ktesting.NewTestContext(t)
	for i, st := range steps {
		p.Poll(ctx)
		snap := p.Current()
		switch {
		case st.want == "" && snap != nil:
			t.Errorf("step %d: snapshot %v, want none", i, snap.Samples)
		case st.want != "" && (snap == nil || len(snap.Samples) != 1 || snap.Samples[0].UUID != st.want):
			t.Errorf("step %d: snapshot %v, want one sample of %s", i, snap, st.want)
		case st.want != "":
			if v, _ := snap.Samples[0].Get(UtilizationPercent); v != st.util {
				t.Errorf("step %d: utilization %v, want %v", i, v, st.util)
			}
		}
		if p.Failures() != st.failed || counted != st.failed {
			t.Errorf("step %d: %d failures (%d counted), want %d", i, p.Failures(), counted, st.failed)
		}
	}
}

func TestPollerShutdownIsNoFailure(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	p := &Poller{Read: func(ctx context.Context) ([]Sample, error) { return nil, ctx.Err() }}
	p.Poll(ctx)
	if p.Failures() != 0 {
		t.Errorf("a poll cut off by shutdown counted as %d failures", p.Failures())
	}
}

// Run polls at once, before the first tick.
func TestRunPollsAtOnce(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	p := &Poller{Interval: 1 << 40, Read: func(context.Context) ([]Sample, error) {
		defer cancel()
		return []Sample{sample("GPU-a", 1)}, nil
	}}
	p.Run(ctx)
	if snap := p.Current(); snap == nil || len(snap.Samples) != 1 {
		t.Errorf("after Run: %v", snap)
	}
}
