package sim

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/telemetry"
)

func readTelemetry(t *testing.T, b *Backend) map[string]telemetry.Sample {
	t.Helper()
	samples, err := b.ReadTelemetry(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]telemetry.Sample{}
	for _, s := range samples {
		if _, dup := out[s.UUID]; dup {
			t.Errorf("two samples of %s", s.UUID)
		}
		out[s.UUID] = s
	}
	return out
}

func value(t *testing.T, s telemetry.Sample, f telemetry.Field) float64 {
	t.Helper()
	v, ok := s.Get(f)
	if !ok {
		t.Fatalf("%s: %s unknown", s.UUID, f)
	}
	return v
}

// Every GPU and partition reports, idle without a load; a load moves
// memory and utilization, and with them power, temperature and clock.
func TestReadTelemetry(t *testing.T) {
	m := mustProfile(t, "dgx-h100-mig")
	b, dir := newBackend(t, m)
	n := discover(t, b)
	gpu := n.GPUs[0]
	var parted inventory.GPU // a GPU with partitions
	for _, g := range n.GPUs {
		if len(g.Partitions) > 1 {
			parted = g
			break
		}
	}
	if parted.UUID == "" {
		t.Fatal("dgx-h100-mig has no partitioned GPU")
	}
	part := parted.Partitions[0]

	idle := readTelemetry(t, b)
	want := len(n.GPUs)
	for _, g := range n.GPUs {
		want += len(g.Partitions)
	}
	if len(idle) != want {
		t.Errorf("%d samples, want one per GPU and partition (%d)", len(idle), want)
	}
	s := idle[gpu.UUID]
	for _, c := range []struct {
		f    telemetry.Field
		want float64
	}{
		{telemetry.MemoryTotalBytes, float64(gpu.MemoryBytes)},
		{telemetry.MemoryUsedBytes, 0},
		{telemetry.UtilizationPercent, 0},
		{telemetry.TemperatureCelsius, 30},
		{telemetry.PowerWatts, 70},
		{telemetry.PowerLimitWatts, 700},
		{telemetry.SMClockMHz, 396},
	} {
		if got := value(t, s, c.f); got != c.want {
			t.Errorf("idle %s: %v, want %v", c.f, got, c.want)
		}
	}
	if got := value(t, idle[part.UUID], telemetry.MemoryTotalBytes); got != float64(part.MemoryBytes) {
		t.Errorf("partition's total memory %v, want %d", got, part.MemoryBytes)
	}
	if idle[part.UUID].Has(telemetry.PowerWatts) {
		t.Error("a partition reports power: only its GPU draws it")
	}

	if err := SetLoad(dir, gpu.UUID, Load{UtilizationPercent: 70, MemoryUsedBytes: 30 << 30}); err != nil {
		t.Fatal(err)
	}
	if err := SetLoad(dir, part.UUID, Load{UtilizationPercent: 100, MemoryUsedBytes: 1 << 40}); err != nil {
		t.Fatal(err)
	}
	busy := readTelemetry(t, b)
	s = busy[gpu.UUID]
	for _, c := range []struct {
		f    telemetry.Field
		want float64
	}{
		{telemetry.MemoryUsedBytes, 30 << 30},
		{telemetry.UtilizationPercent, 70},
		{telemetry.TemperatureCelsius, 30 + 45*0.7},
		{telemetry.PowerWatts, 70 + 630*0.7},
		{telemetry.SMClockMHz, 396 + 1584*0.7},
	} {
		if got := value(t, s, c.f); got < c.want-1e-9 || got > c.want+1e-9 {
			t.Errorf("loaded %s: %v, want %v", c.f, got, c.want)
		}
	}
	// More memory than the partition has reads as all of it, and counts
	// towards its GPU with the partition's share of its compute.
	p := busy[part.UUID]
	if got := value(t, p, telemetry.MemoryUsedBytes); got != float64(part.MemoryBytes) {
		t.Errorf("partition's used memory %v, want its total %d", got, part.MemoryBytes)
	}
	g := busy[parted.UUID]
	if got := value(t, g, telemetry.MemoryUsedBytes); got != float64(part.MemoryBytes) {
		t.Errorf("partitioned GPU's used memory %v, want its partition's %d", got, part.MemoryBytes)
	}
	wantUtil := 100 * float64(part.ComputeUnits) / float64(parted.ComputeUnits)
	if got := value(t, g, telemetry.UtilizationPercent); got != wantUtil {
		t.Errorf("partitioned GPU's utilization %v, want %v", got, wantUtil)
	}

	if err := ClearLoad(dir, gpu.UUID); err != nil {
		t.Fatal(err)
	}
	if got := value(t, readTelemetry(t, b)[gpu.UUID], telemetry.UtilizationPercent); got != 0 {
		t.Errorf("utilization after clear: %v", got)
	}
}

func TestLoadFile(t *testing.T) {
	tests := []struct {
		name, content, err string
	}{
		{name: "none"},
		{name: "corrupt", content: "{", err: "simulated load"},
		{name: "other version", content: `{"version": 2, "devices": {}}`, err: "version 2"},
		{name: "bad utilization", content: `{"version": 1, "devices": {"GPU-a": {"utilizationPercent": 120}}}`, err: "GPU-a: utilization 120% is not within 0..100"},
		{name: "good", content: `{"version": 1, "devices": {"GPU-a": {"utilizationPercent": 20, "memoryUsedBytes": 5}}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.content != "" {
				if err := os.WriteFile(filepath.Join(dir, LoadFile), []byte(tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := ReadLoad(dir)
			if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ReadLoad: %v, want %q", err, tc.err)
			}
		})
	}
	for _, l := range []Load{{UtilizationPercent: -1}, {MemoryUsedBytes: -1}, {UtilizationPercent: 101}} {
		if err := SetLoad(t.TempDir(), "GPU-a", l); err == nil {
			t.Errorf("SetLoad(%+v) accepted", l)
		}
	}
}

// A broken load file fails the read, saying which file.
func TestReadTelemetryBadLoad(t *testing.T) {
	b, dir := newBackend(t, mustProfile(t, "t4-2"))
	if err := os.WriteFile(filepath.Join(dir, LoadFile), []byte("nope"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ReadTelemetry(context.Background()); err == nil || !strings.Contains(err.Error(), "read telemetry of t4-2") || !strings.Contains(err.Error(), LoadFile) {
		t.Errorf("ReadTelemetry: %v", err)
	}
}
