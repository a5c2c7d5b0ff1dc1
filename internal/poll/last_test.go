package poll

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
)

// TestLastKeepsAnswerForAFewFailures: the last good answer outlives
// KeepFailed failed polls, is dropped at the next, and a good poll
// restarts the count; every failure is counted.
func TestLastKeepsAnswerForAFewFailures(t *testing.T) {
	fail := errors.New("source busy")
	steps := []struct {
		answer string
		err    error
		want   string
		failed uint64
	}{
		{answer: "a", want: "a"},
		{err: fail, want: "a", failed: 1},
		{err: fail, want: "a", failed: 2},
		{err: fail, want: "", failed: 3},
		{answer: "b", want: "b", failed: 3},
		{err: fail, want: "b", failed: 4},
		{err: fail, want: "b", failed: 5},
		{err: fail, want: "", failed: 6},
	}
	i := 0
	var counted uint64
	p := &Last[string]{What: "test", Interval: time.Hour, Failed: func() { counted++ },
		Read: func(context.Context) (string, error) { return steps[i].answer, steps[i].err }}
	_, ctx := ktesting.NewTestContext(t)
	for ; i < len(steps); i++ {
		p.Poll(ctx)
		st := steps[i]
		if got := p.Current(); got != st.want {
			t.Errorf("step %d: %q, want %q", i, got, st.want)
		}
		if p.Failures() != st.failed || counted != st.failed {
			t.Errorf("step %d: %d failures (%d counted), want %d", i, p.Failures(), counted, st.failed)
		}
	}
}

func TestLastShutdownIsNoFailure(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	p := &Last[int]{What: "test", Read: func(ctx context.Context) (int, error) { return 0, ctx.Err() }}
	p.Poll(ctx)
	if p.Failures() != 0 {
		t.Errorf("a poll cut off by shutdown counted as %d failures", p.Failures())
	}
}

// TestLastReadTimeout: a read gets at most one interval.
func TestLastReadTimeout(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	var deadline time.Duration
	p := &Last[int]{What: "test", Interval: 50 * time.Millisecond, Read: func(ctx context.Context) (int, error) {
		d, ok := ctx.Deadline()
		if !ok {
			return 0, errors.New("no deadline")
		}
		deadline = time.Until(d)
		return 1, nil
	}}
	p.Poll(ctx)
	if p.Current() != 1 || deadline <= 0 || deadline > 50*time.Millisecond {
		t.Errorf("read got %v, want at most the 50ms interval", deadline)
	}
}

// TestLastRun polls at once, then on every tick, until its context ends.
func TestLastRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	reads := 0
	p := &Last[int]{What: "test", Interval: time.Millisecond, Read: func(context.Context) (int, error) {
		reads++
		if reads == 3 {
			cancel()
		}
		return reads, nil
	}}
	p.Run(ctx)
	if reads != 3 || p.Current() != 3 {
		t.Errorf("%d reads, current %d; want 3, 3", reads, p.Current())
	}
}
