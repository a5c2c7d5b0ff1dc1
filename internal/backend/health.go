package backend

import "time"

// Health signals: what a backend observed on a device, raw. The agent's
// health package (internal/health) decides what a signal means (a taint, its
// effect, when it clears); backends only report, one event per observation,
// in the order they saw them.

// HealthKind is the source of a health signal.
type HealthKind string

const (
	// HealthXID is an NVIDIA XID error; Code is its number.
	HealthXID HealthKind = "xid"
	// HealthECCSingleBit and HealthECCDoubleBit carry in Count the device's
	// volatile corrected (single-bit) or uncorrected (double-bit) ECC error
	// count, as it is now: cumulative since the last reset, so a rate is a
	// difference of two events.
	HealthECCSingleBit HealthKind = "ecc-sbe"
	HealthECCDoubleBit HealthKind = "ecc-dbe"
	// HealthRowRemapPending: remapped rows wait for a GPU reset to take
	// effect (Count 1), or no longer do (Count 0).
	HealthRowRemapPending HealthKind = "row-remap-pending"
	// HealthRowRemapFailed: a row remap failed (Count 1); the memory
	// cannot be repaired.
	HealthRowRemapFailed HealthKind = "row-remap-failed"
	// HealthRetiredPagesPending: retired pages wait for a reset (Count 1),
	// or no longer do (Count 0).
	HealthRetiredPagesPending HealthKind = "retired-pages-pending"
	// HealthRASUncorrectable and HealthRASCorrectable carry in Count an AMD
	// GPU's RAS error counters summed over its blocks (ras/*_err_count, ue
	// and ce), cumulative like the ECC counts; Message names the blocks.
	HealthRASUncorrectable HealthKind = "ras-ue"
	HealthRASCorrectable   HealthKind = "ras-ce"
	// HealthLost: the GPU stopped answering or left the bus.
	HealthLost HealthKind = "lost"
	// HealthRecovered: the GPU is back and reset (a lost GPU answering
	// again, an AMD GPU reset, the simulator's --clear): every condition of
	// the device clears and counters start a new baseline.
	HealthRecovered HealthKind = "recovered"
)

// HealthEvent is one health signal of one device.
type HealthEvent struct {
	// UUID is the GPU's (or a partition's, for signals a partition has of
	// its own) UUID.
	UUID string
	Kind HealthKind
	// Code is the XID number (HealthXID); 0 otherwise.
	Code int64
	// Count is the counter value of counting kinds (see each kind).
	Count int64
	// Time is when the backend observed it.
	Time time.Time
	// Message says what happened in words, for logs and the pod status.
	Message string
}
