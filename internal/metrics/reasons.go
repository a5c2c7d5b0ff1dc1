package metrics

// Reasons a prepare or unprepare fails, the `reason` label of the error
// counters. The set is fixed and small so that the label cannot grow with
// error messages; anything unclassified is ReasonOther.
const (
	ReasonNotAllocated    = "not_allocated"
	ReasonDeviceNotOnNode = "device_not_on_node"
	ReasonDeviceInUse     = "device_in_use"
	ReasonConfigRejected  = "config_rejected"
	ReasonCDIWrite        = "cdi_write"
	ReasonCheckpoint      = "checkpoint"
	ReasonPartition       = "partition"
	ReasonSharing         = "sharing"
	ReasonPassthrough     = "passthrough"
	ReasonOther           = "other"
	resultSuccess         = "success"
	resultError           = "error"
	labelReason           = "reason"
	labelResult           = "result"
)

// Reasons lists every reason; the error counters start at zero for each, so
// that rate() and increase() see the first error.
var Reasons = []string{
	ReasonNotAllocated, ReasonDeviceNotOnNode, ReasonDeviceInUse, ReasonConfigRejected,
	ReasonCDIWrite, ReasonCheckpoint, ReasonPartition, ReasonSharing, ReasonPassthrough, ReasonOther,
}

// Evidence on which a prepared claim was released for another claim
// allocated its devices, the `evidence` label of
// tessera_stale_claims_released_total (docs/operating.md#stale-claims).
const (
	ReleasedUnconfirmed = "unconfirmed"
	ReleasedDeleted     = "deleted"
	ReleasedReplaced    = "replaced"
	ReleasedDeallocated = "deallocated"
)

// Released lists every evidence label; each series starts at zero.
var Released = []string{ReleasedUnconfirmed, ReleasedDeleted, ReleasedReplaced, ReleasedDeallocated}

// Partition operations, the `operation` label.
const (
	OpCarve   = "carve"
	OpDestroy = "destroy"
)

// Published device types, the `type` label.
const (
	TypeGPU       = "gpu"
	TypePartition = "partition"
)
