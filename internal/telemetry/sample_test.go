package telemetry

import (
	"math"
	"testing"
)

func TestSampleFields(t *testing.T) {
	tests := []struct {
		name  string
		set   map[Field]float64
		clear []Field
		want  map[Field]float64 // the known fields, exactly
	}{
		{name: "nothing known", want: map[Field]float64{}},
		{name: "every field", set: map[Field]float64{MemoryUsedBytes: 1 << 30, MemoryTotalBytes: 80 << 30, UtilizationPercent: 70, TemperatureCelsius: 55, PowerWatts: 350.5, PowerLimitWatts: 700, SMClockMHz: 1980},
			want: map[Field]float64{MemoryUsedBytes: 1 << 30, MemoryTotalBytes: 80 << 30, UtilizationPercent: 70, TemperatureCelsius: 55, PowerWatts: 350.5, PowerLimitWatts: 700, SMClockMHz: 1980}},
		{name: "zero is a reading", set: map[Field]float64{UtilizationPercent: 0}, want: map[Field]float64{UtilizationPercent: 0}},
		{name: "NaN and Inf are not", set: map[Field]float64{PowerWatts: math.NaN(), TemperatureCelsius: math.Inf(1), MemoryUsedBytes: 5}, want: map[Field]float64{MemoryUsedBytes: 5}},
		{name: "cleared", set: map[Field]float64{PowerWatts: 100, PowerLimitWatts: 300}, clear: []Field{PowerWatts}, want: map[Field]float64{PowerLimitWatts: 300}},
		{name: "out of range field ignored", set: map[Field]float64{numFields: 1, SMClockMHz: 2}, want: map[Field]float64{SMClockMHz: 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s Sample
			for f, v := range tc.set {
				s.Set(f, v)
			}
			for _, f := range tc.clear {
				s.Clear(f)
			}
			for _, f := range Fields {
				v, ok := s.Get(f)
				w, want := tc.want[f]
				if ok != want || v != w || s.Has(f) != want {
					t.Errorf("%s: (%v, %v), want (%v, %v)", f, v, ok, w, want)
				}
			}
			if s.Empty() != (len(tc.want) == 0) {
				t.Errorf("Empty() = %v with %d fields known", s.Empty(), len(tc.want))
			}
		})
	}
}

func TestFieldNames(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range Fields {
		n := f.String()
		if n == "" || n == "unknown" || seen[n] {
			t.Errorf("field %d has name %q", f, n)
		}
		seen[n] = true
	}
	if numFields.String() != "unknown" {
		t.Errorf("out of range field named %q", numFields.String())
	}
}
