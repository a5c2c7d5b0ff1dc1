package explain

import (
	"github.com/tessera-gpu/tessera/internal/inspect"
)

// Explanation says, node by node, why pending claims can or cannot be
// allocated. The verdict of each node is the scheduler's allocator's
// (structured.Allocator.Allocate on that node); the rest explains it.
type Explanation struct {
	// Pod is set when the claims are a pod's.
	Pod    string   `json:"pod,omitempty"`
	Claims []string `json:"claims"`
	// Notes are remarks about the input, e.g. which DeviceClasses were used.
	Notes []string      `json:"notes,omitempty"`
	Nodes []NodeVerdict `json:"nodes"`
}

// NodeVerdict is one node's answer.
type NodeVerdict struct {
	Node string `json:"node"`
	Fits bool   `json:"fits"`
	// Error is a fatal allocator error (e.g. a CEL runtime error).
	Error string `json:"error,omitempty"`
	// Devices are the allocator's picks when the claims fit.
	Devices []Pick `json:"devices,omitempty"`
	// Reasons say in words why the claims do not fit.
	Reasons     []string           `json:"reasons,omitempty"`
	Requests    []RequestReport    `json:"requests"`
	Constraints []ConstraintReport `json:"constraints,omitempty"`
}

// Pick is one device of an allocation result.
type Pick struct {
	Claim   string `json:"claim"`
	Request string `json:"request"`
	Pool    string `json:"pool"`
	Device  string `json:"device"`
	// Shared is set for a share of a multi-allocatable device; Consumed is
	// what it consumes, e.g. memory=7Gi.
	Shared   bool     `json:"shared,omitempty"`
	Consumed []string `json:"consumed,omitempty"`
}

// RequestReport follows one request (or firstAvailable subrequest,
// "request/subrequest") over one node's devices, filter by filter.
type RequestReport struct {
	Claim   string `json:"claim"`
	Request string `json:"request"`
	// Alternative is the 1-based position of a firstAvailable subrequest.
	Alternative    int    `json:"alternative,omitempty"`
	Class          string `json:"deviceClass"`
	AllocationMode string `json:"allocationMode"`
	// Count is the number of devices needed (for All: every match).
	Count int64 `json:"count"`
	// Problem is set when the request cannot be evaluated (unknown class).
	Problem     string `json:"problem,omitempty"`
	NodeDevices int    `json:"nodeDevices"`
	// ClassMatched is how many of the node's devices the class selectors
	// match; Selectors how many of those each request selector matches on
	// its own; Matching how many all of them match.
	ClassMatched int              `json:"classMatched"`
	Selectors    []SelectorReport `json:"selectors,omitempty"`
	Matching     int              `json:"matching"`
	// Of the matching devices: held by other claims, blocked by exhausted
	// shared counters, tainted (not tolerated), without enough capacity
	// left, and usable.
	InUse             int             `json:"inUse"`
	InUseBy           []string        `json:"inUseBy,omitempty"`
	CountersExhausted int             `json:"countersExhausted"`
	Counters          []CounterReport `json:"exhaustedCounters,omitempty"`
	Tainted           int             `json:"tainted"`
	Taints            []string        `json:"taints,omitempty"`
	CapacityShort     int             `json:"capacityShort"`
	Usable            int             `json:"usable"`
	// Enough: Usable covers Count (for All: every matching device usable).
	Enough bool `json:"enough"`

	usable []inspect.PoolDevice
}

// SelectorReport is one CEL selector of a request evaluated alone over the
// devices its class matches.
type SelectorReport struct {
	Expression string `json:"expression"`
	Matched    int    `json:"matched"`
	// Errors counts devices the expression fails on (e.g. a missing
	// attribute); Error is the first message.
	Errors int    `json:"errors,omitempty"`
	Error  string `json:"error,omitempty"`
}

// CounterReport is a shared counter set whose counters are too low for
// some matching devices, and the claims holding them.
type CounterReport struct {
	Pool       string   `json:"pool"`
	CounterSet string   `json:"counterSet"`
	Counters   []string `json:"counters"`
	Devices    int      `json:"devices"`
	HeldBy     []string `json:"heldBy,omitempty"`
	// ModeConflict is true where the counters are a GPU's partition mode
	// tokens (publish.ModeTokenPrefix): the devices need another mode.
	ModeConflict bool `json:"modeConflict,omitempty"`
}

// ConstraintReport is one claim constraint checked against the usable
// devices of the requests it covers.
type ConstraintReport struct {
	Claim     string `json:"claim"`
	Kind      string `json:"kind"` // matchAttribute or distinctAttribute
	Attribute string `json:"attribute"`
	// Satisfiable is false when no set of usable devices can meet it.
	Satisfiable bool   `json:"satisfiable"`
	Message     string `json:"message"`

	moot bool
}

// Fitting returns the names of the nodes the claims fit on.
func (e *Explanation) Fitting() []string {
	var out []string
	for _, n := range e.Nodes {
		if n.Fits {
			out = append(out, n.Node)
		}
	}
	return out
}
