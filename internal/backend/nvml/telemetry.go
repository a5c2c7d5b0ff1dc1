//go:build cgo && linux

package nvml

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/telemetry"
)

var _ backend.TelemetryReader = (*Backend)(nil)

// Telemetry from NVML: per GPU one call per reading (memory, utilization,
// temperature, power, power limit, SM clock), and per MIG device its
// memory, the one reading NVML gives a MIG device handle (utilization,
// power and clocks are the GPU's, and in MIG mode NVML answers
// NOT_SUPPORTED for the GPU's utilization). A reading the GPU does not
// support is left unknown; NVML answers those in microseconds, so they are
// asked again each poll rather than remembered (a driver update may add
// one).

// ReadTelemetry implements backend.TelemetryReader. It fails only when no
// GPU gave a reading.
func (b *Backend) ReadTelemetry(ctx context.Context) ([]telemetry.Sample, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, errors.New("read telemetry: nvml backend is closed")
	}
	// NVML is thread-safe; the handles are copied so a carve does not wait
	// on a poll, nor a poll on a carve.
	handles := slices.Clone(b.handles)
	b.mu.Unlock()
	out := make([]telemetry.Sample, 0, len(handles))
	var errs []error
	for i, h := range handles {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if h == nil {
			continue
		}
		uuid, ret := h.GetUUID()
		if err := check("nvmlDeviceGetUUID", ret); err != nil {
			errs = append(errs, fmt.Errorf("read telemetry of GPU %d: %w", i, err))
			continue
		}
		s, err := readGPUTelemetry(uuid, h)
		if err != nil {
			errs = append(errs, err)
		}
		if !s.Empty() {
			out = append(out, s)
		}
		out = append(out, readMIGTelemetry(h)...)
	}
	if len(out) == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(errs) > 0 {
		b.logger.V(4).Info("Some GPU telemetry unreadable", "err", errors.Join(errs...).Error())
	}
	return out, nil
}

// readGPUTelemetry makes the six calls of one GPU. Calls it does not
// support leave their field unknown; other failures do too, and are
// returned, joined, for the log.
func readGPUTelemetry(uuid string, h nvml.Device) (telemetry.Sample, error) {
	s := telemetry.Sample{UUID: uuid}
	var errs []error
	read := func(call string, ret nvml.Return, set func()) {
		err := check(call, ret)
		switch {
		case err == nil:
			set()
		case !notSupported(err) && !is(err, nvml.ERROR_NO_PERMISSION):
			// NO_PERMISSION: a whole GPU's memory in MIG mode for an
			// unprivileged caller; an answer, like NOT_SUPPORTED.
			errs = append(errs, err)
		}
	}
	mem, ret := h.GetMemoryInfo()
	read("nvmlDeviceGetMemoryInfo", ret, func() {
		s.Set(telemetry.MemoryUsedBytes, float64(mem.Used))
		s.Set(telemetry.MemoryTotalBytes, float64(mem.Total))
	})
	util, ret := h.GetUtilizationRates()
	read("nvmlDeviceGetUtilizationRates", ret, func() { s.Set(telemetry.UtilizationPercent, float64(util.Gpu)) })
	temp, ret := h.GetTemperature(nvml.TEMPERATURE_GPU)
	read("nvmlDeviceGetTemperature", ret, func() { s.Set(telemetry.TemperatureCelsius, float64(temp)) })
	power, ret := h.GetPowerUsage()
	read("nvmlDeviceGetPowerUsage", ret, func() { s.Set(telemetry.PowerWatts, float64(power)/1000) })
	limit, ret := h.GetEnforcedPowerLimit()
	read("nvmlDeviceGetEnforcedPowerLimit", ret, func() { s.Set(telemetry.PowerLimitWatts, float64(limit)/1000) })
	clock, ret := h.GetClockInfo(nvml.CLOCK_SM)
	read("nvmlDeviceGetClockInfo(SM)", ret, func() { s.Set(telemetry.SMClockMHz, float64(clock)) })
	if len(errs) > 0 {
		return s, fmt.Errorf("read telemetry of %s: %w", uuid, errors.Join(errs...))
	}
	return s, nil
}

// readMIGTelemetry reads the memory of each MIG device of h. The MIG mode
// is asked first: on a GPU without MIG it is the one call, where listing
// the MIG devices would be eight. A MIG device that cannot be read is left
// out; Discover, not telemetry, reports broken MIG state.
func readMIGTelemetry(h nvml.Device) []telemetry.Sample {
	if cur, _, ret := h.GetMigMode(); ret != nvml.SUCCESS || cur != nvml.DEVICE_MIG_ENABLE {
		return nil
	}
	var out []telemetry.Sample
	_ = eachMIGDevice(h, func(_ int, d nvml.Device) error {
		uuid, ret := d.GetUUID()
		if ret != nvml.SUCCESS {
			return nil
		}
		mem, ret := d.GetMemoryInfo()
		if ret != nvml.SUCCESS {
			return nil
		}
		s := telemetry.Sample{UUID: uuid}
		s.Set(telemetry.MemoryUsedBytes, float64(mem.Used))
		s.Set(telemetry.MemoryTotalBytes, float64(mem.Total))
		out = append(out, s)
		return nil
	})
	return out
}
