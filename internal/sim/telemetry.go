package sim

import (
	"context"
	"fmt"
	"strings"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/telemetry"
)

var _ backend.TelemetryReader = (*Backend)(nil)

// Telemetry of a simulated node: memory totals from the inventory, used
// memory and utilization from the load file (load.go), and temperature,
// power and clock modelled from utilization, so the numbers move when a
// test moves the load, and are the same for the same load every time.

// thermal is a GPU model's envelope: its board power limit and its top
// graphics clock (vendors' data sheets: H100/H200 SXM 700 W 1980 MHz,
// A100 SXM 400 W and PCIe 300 W 1410 MHz, L4 72 W 2040 MHz, T4 70 W
// 1590 MHz, MI300X 750 W 2100 MHz, MI210 300 W 1700 MHz).
type thermal struct {
	limitW, clockMHz float64
}

var thermals = map[string]thermal{
	"H100": {700, 1980}, "H200": {700, 1980}, "A100": {400, 1410}, "L4": {72, 2040},
	"T4": {70, 1590}, "MI300X": {750, 2100}, "MI210": {300, 1700},
}

// defaultThermal is a machine file's model the table does not know.
var defaultThermal = thermal{300, 1500}

func thermalOf(g *inventory.GPU) thermal {
	t, ok := thermals[g.Model]
	if !ok {
		return defaultThermal
	}
	if g.Model == "A100" && strings.Contains(g.ProductName, "PCIe") {
		t.limitW = 300
	}
	return t
}

// The model: an idle GPU draws a tenth of its limit at 30 °C and a fifth
// of its top clock; a fully busy one its whole limit at 75 °C and its top
// clock, linearly in between.
const (
	idlePowerShare = 0.1
	idleClockShare = 0.2
	idleCelsius    = 30
	busyCelsius    = 75
)

// ReadTelemetry implements backend.TelemetryReader: one sample per GPU and
// per partition. A partition reports its memory and utilization; its GPU
// reports the sum of its own load and its partitions' (utilization
// weighted by their compute units), and the power, temperature and clock
// that utilization gives.
func (b *Backend) ReadTelemetry(ctx context.Context) ([]telemetry.Sample, error) {
	loads, err := ReadLoad(b.stateDir)
	if err != nil {
		return nil, fmt.Errorf("read telemetry of %s: %w", b.machine.Name, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.node.GPUs)
	for i := range b.node.GPUs {
		n += len(b.node.GPUs[i].Partitions)
	}
	out := make([]telemetry.Sample, 0, n)
	for i := range b.node.GPUs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		g := &b.node.GPUs[i]
		if ok, err := b.onDriver(g); err != nil || !ok {
			// Passed through (pci.go): its driver cannot read it, and an
			// unknown reading is no sample, not zeros.
			continue
		}
		own := loads[g.UUID]
		used, util := float64(own.MemoryUsedBytes), own.UtilizationPercent
		gi := len(out) // the GPU first, its partitions after it
		out = append(out, telemetry.Sample{UUID: g.UUID})
		for _, p := range g.Partitions {
			l := loads[p.UUID]
			pUsed := min(float64(l.MemoryUsedBytes), float64(p.MemoryBytes))
			s := telemetry.Sample{UUID: p.UUID}
			s.Set(telemetry.MemoryTotalBytes, float64(p.MemoryBytes))
			s.Set(telemetry.MemoryUsedBytes, pUsed)
			s.Set(telemetry.UtilizationPercent, l.UtilizationPercent)
			out = append(out, s)
			used += pUsed
			if g.ComputeUnits > 0 {
				util += l.UtilizationPercent * float64(p.ComputeUnits) / float64(g.ComputeUnits)
			}
		}
		used, util = min(used, float64(g.MemoryBytes)), min(util, 100)
		t, busy := thermalOf(g), util/100
		s := &out[gi]
		s.Set(telemetry.MemoryTotalBytes, float64(g.MemoryBytes))
		s.Set(telemetry.MemoryUsedBytes, used)
		s.Set(telemetry.UtilizationPercent, util)
		s.Set(telemetry.TemperatureCelsius, idleCelsius+(busyCelsius-idleCelsius)*busy)
		s.Set(telemetry.PowerWatts, t.limitW*(idlePowerShare+(1-idlePowerShare)*busy))
		s.Set(telemetry.PowerLimitWatts, t.limitW)
		s.Set(telemetry.SMClockMHz, t.clockMHz*(idleClockShare+(1-idleClockShare)*busy))
	}
	return out, nil
}
