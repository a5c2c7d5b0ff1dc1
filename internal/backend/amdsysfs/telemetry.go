package amdsysfs

import (
	"context"
	"fmt"
	"path"
	"strconv"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/telemetry"
)

var _ backend.TelemetryReader = (*Backend)(nil)

// Telemetry from amdgpu's sysfs, per PCI device (card): the readings are
// the card's, so on a partitioned card (CPX) they are reported for the GPU,
// not for each partition. Under the card's PCI directory:
//
//	gpu_busy_percent                     utilization, percent
//	mem_info_vram_used, mem_info_vram_total   bytes
//	hwmon/hwmonN/temp1_input             edge temperature, millidegrees Celsius
//	hwmon/hwmonN/power1_average          power, microwatts (power1_input on
//	                                     newer kernels and RDNA3)
//	hwmon/hwmonN/power1_cap              the power limit, microwatts
//	hwmon/hwmonN/freq1_input             the shader clock (sclk), hertz
//
// A file that is missing (an older kernel, a card without the sensor) or
// unreadable leaves its field unknown.

// ReadTelemetry implements backend.TelemetryReader: one sample per GPU
// with a PCI device directory and any reading. It fails only when the
// GPUs cannot be listed.
func (b *Backend) ReadTelemetry(ctx context.Context) ([]telemetry.Sample, error) {
	n, err := b.Discover(ctx)
	if err != nil {
		return nil, fmt.Errorf("read telemetry: %w", err)
	}
	out := make([]telemetry.Sample, 0, len(n.GPUs))
	for _, g := range n.GPUs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if g.PCIBusID == "" {
			continue
		}
		if s := readCardTelemetry(b.root, g.UUID, path.Join(pciDevicesDir, g.PCIBusID)); !s.Empty() {
			out = append(out, s)
		}
	}
	return out, nil
}

func readCardTelemetry(r fsRoot, uuid, dev string) telemetry.Sample {
	s := telemetry.Sample{UUID: uuid}
	set := func(f telemetry.Field, rel string, scale float64) bool {
		v, err := r.readInt(path.Join(dev, rel))
		if err != nil || v < 0 {
			return false
		}
		s.Set(f, float64(v)*scale)
		return true
	}
	set(telemetry.UtilizationPercent, "gpu_busy_percent", 1)
	set(telemetry.MemoryUsedBytes, "mem_info_vram_used", 1)
	set(telemetry.MemoryTotalBytes, "mem_info_vram_total", 1)
	if hw, ok := hwmonDir(r, dev); ok {
		set(telemetry.TemperatureCelsius, path.Join(hw, "temp1_input"), 1e-3)
		if !set(telemetry.PowerWatts, path.Join(hw, "power1_average"), 1e-6) {
			set(telemetry.PowerWatts, path.Join(hw, "power1_input"), 1e-6)
		}
		set(telemetry.PowerLimitWatts, path.Join(hw, "power1_cap"), 1e-6)
		set(telemetry.SMClockMHz, path.Join(hw, "freq1_input"), 1e-6)
	}
	return s
}

// hwmonDir is the card's amdgpu hwmon directory, relative to dev: the
// lowest-numbered hwmon/hwmonN (a card registers one).
func hwmonDir(r fsRoot, dev string) (string, bool) {
	idx := r.prefixedIndex(path.Join(dev, "hwmon"), "hwmon")
	if len(idx) == 0 {
		return "", false
	}
	return path.Join("hwmon", "hwmon"+strconv.Itoa(idx[0])), true
}
