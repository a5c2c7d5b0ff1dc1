package amdsysfs

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/telemetry"
)

type fields map[telemetry.Field]float64

func TestReadTelemetry(t *testing.T) {
	// broken: the MI210 fixture with a temperature that is no number and
	// no power files at all.
	broken := copyTree(t, fixture("mi210-pcie"))
	hw := filepath.Join(broken, "sys/devices/pci0000:60/0000:60:01.0/0000:63:00.0/hwmon/hwmon2")
	writeFile(t, hw, "temp1_input", "N/A\n")
	for _, f := range []string{"power1_average", "power1_cap"} {
		if err := os.Remove(filepath.Join(hw, f)); err != nil {
			t.Fatal(err)
		}
	}
	const mi300Total, mi210Total = float64(192 << 30), float64(68702699520)
	tests := []struct {
		name, root string
		samples    int
		// want is the known fields of the GPU at index, exactly
		index int
		want  fields
	}{
		{name: "MI300X SPX", root: fixture("mi300x-8-spx"), samples: 8, index: 1, want: fields{
			telemetry.UtilizationPercent: 15, telemetry.MemoryTotalBytes: mi300Total, telemetry.MemoryUsedBytes: float64(int64(192<<30) / 3),
			telemetry.TemperatureCelsius: 41, telemetry.PowerWatts: 110, telemetry.PowerLimitWatts: 750, telemetry.SMClockMHz: 2100}},
		// A partitioned card reports for its GPU: sysfs has the card's.
		{name: "MI300X CPX", root: fixture("mi300x-8-cpx"), samples: 8, index: 0, want: fields{
			telemetry.UtilizationPercent: 5, telemetry.MemoryTotalBytes: mi300Total, telemetry.MemoryUsedBytes: mi300Total / 2,
			telemetry.TemperatureCelsius: 40, telemetry.PowerWatts: 100, telemetry.PowerLimitWatts: 750, telemetry.SMClockMHz: 2100}},
		{name: "W7900 power1_input", root: fixture("w7900"), samples: 1, index: 0, want: fields{
			telemetry.UtilizationPercent: 5, telemetry.MemoryTotalBytes: 48 << 30, telemetry.MemoryUsedBytes: 24 << 30,
			telemetry.TemperatureCelsius: 40, telemetry.PowerWatts: 100, telemetry.PowerLimitWatts: 295, telemetry.SMClockMHz: 2495}},
		{name: "MI210 without hwmon", root: fixture("mi210-pcie"), samples: 2, index: 1, want: fields{
			telemetry.UtilizationPercent: 15, telemetry.MemoryTotalBytes: mi210Total, telemetry.MemoryUsedBytes: float64(int64(mi210Total) / 3)}},
		{name: "bad and missing files", root: broken, samples: 2, index: 0, want: fields{
			telemetry.UtilizationPercent: 5, telemetry.MemoryTotalBytes: mi210Total, telemetry.MemoryUsedBytes: mi210Total / 2, telemetry.SMClockMHz: 1700}},
		{name: "no telemetry files", root: fixture("mi250x-4"), samples: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := New(Options{SysfsRoot: tc.root, Logger: ktesting.NewLogger(t, ktesting.NewConfig())})
			if err != nil {
				t.Fatal(err)
			}
			n, err := b.Discover(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			samples, err := b.ReadTelemetry(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(samples) != tc.samples {
				t.Fatalf("%d samples, want %d", len(samples), tc.samples)
			}
			if tc.samples == 0 {
				return
			}
			uuid := n.GPUs[tc.index].UUID
			var s telemetry.Sample
			for _, x := range samples {
				if x.UUID == uuid {
					s = x
				}
			}
			if s.UUID == "" {
				t.Fatalf("no sample of GPU %d (%s)", tc.index, uuid)
			}
			for _, f := range telemetry.Fields {
				v, known := s.Get(f)
				w, wantKnown := tc.want[f]
				if known != wantKnown || v < w-1e-6 || v > w+1e-6 {
					t.Errorf("%s: (%v, %v), want (%v, %v)", f, v, known, w, wantKnown)
				}
			}
		})
	}
}

// Without a topology there is nothing to read, and the read says so.
func TestReadTelemetryFails(t *testing.T) {
	root := copyTree(t, fixture("w7900"))
	b, err := New(Options{SysfsRoot: root, Logger: ktesting.NewLogger(t, ktesting.NewConfig())})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(root, topologyDir)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ReadTelemetry(context.Background()); err == nil {
		t.Error("read telemetry without a topology succeeded")
	}
}
