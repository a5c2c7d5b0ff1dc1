package telemetry

import "math"

// Field is one reading of a Sample.
type Field uint8

// The fields, each in the unit its name says. Backends report what their
// hardware gives; a field they cannot read stays unknown.
const (
	// MemoryUsedBytes and MemoryTotalBytes are the device's memory (a MIG
	// device's or an AMD card's VRAM).
	MemoryUsedBytes Field = iota
	MemoryTotalBytes
	// UtilizationPercent is the share of the last sample period the
	// device was busy, 0..100.
	UtilizationPercent
	// TemperatureCelsius is the GPU core's temperature.
	TemperatureCelsius
	// PowerWatts is the power draw; PowerLimitWatts the limit enforced now.
	PowerWatts
	PowerLimitWatts
	// SMClockMHz is the graphics (NVIDIA SM, AMD shader) clock.
	SMClockMHz

	numFields
)

// Fields lists every field in order, for callers that walk a sample.
var Fields = [numFields]Field{MemoryUsedBytes, MemoryTotalBytes, UtilizationPercent, TemperatureCelsius, PowerWatts, PowerLimitWatts, SMClockMHz}

var fieldNames = [numFields]string{"memory_used_bytes", "memory_total_bytes", "utilization_percent", "temperature_celsius", "power_watts", "power_limit_watts", "sm_clock_mhz"}

// String names the field (memory_used_bytes), for logs and tests.
func (f Field) String() string {
	if f >= numFields {
		return "unknown"
	}
	return fieldNames[f]
}

// Sample is one device's readings at one poll. Values sit in a fixed array
// with a bitmask of the known ones rather than behind pointers: a sample is
// copied by value, and a poll of a whole node allocates one slice.
type Sample struct {
	// UUID names the device as the backend's inventory does: the GPU's
	// UUID, a MIG device's MIG- UUID, an AMD partition's id.
	UUID string

	values [numFields]float64
	known  uint16
}

// Set records a reading. A NaN or infinite value (a failed conversion) is
// not a reading: the field stays unknown.
func (s *Sample) Set(f Field, v float64) {
	if f >= numFields || math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	s.values[f] = v
	s.known |= 1 << f
}

// Clear makes a field unknown again.
func (s *Sample) Clear(f Field) {
	if f < numFields {
		s.known &^= 1 << f
	}
}

// Get returns a field's value and whether it is known.
func (s Sample) Get(f Field) (float64, bool) {
	if !s.Has(f) {
		return 0, false
	}
	return s.values[f], true
}

// Has reports whether a field is known.
func (s Sample) Has(f Field) bool { return f < numFields && s.known&(1<<f) != 0 }

// Empty reports whether no field is known.
func (s Sample) Empty() bool { return s.known == 0 }
