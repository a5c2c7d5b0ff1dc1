package preparebench

import (
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []time.Duration
		want time.Duration
	}{
		{nil, 0},
		{[]time.Duration{3}, 3},
		{[]time.Duration{5, 1, 3}, 3},
		{[]time.Duration{4, 1, 3, 2}, 2}, // (2+3)/2 in integer nanoseconds
	} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if got := median([]float64{1, 2, 3, 10}); got != 2.5 {
		t.Errorf("median of rates = %v, want 2.5", got)
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := (Options{Sequential: 1, Waves: 1, InFlight: 8, Rounds: 1}).validate(); err != nil {
		t.Error(err)
	}
	if err := (Options{Sequential: 1, Waves: 0, InFlight: 8, Rounds: 1}).validate(); err == nil {
		t.Error("zero waves accepted")
	}
}
