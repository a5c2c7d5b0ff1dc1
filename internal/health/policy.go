package health

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
)

// Effect is what a signal does: a taint effect, or Ignore (nothing at all,
// not even a visible taint).
type Effect string

const (
	Ignore     Effect = "Ignore"
	None       Effect = Effect(resourceapi.DeviceTaintEffectNone)
	NoSchedule Effect = Effect(resourceapi.DeviceTaintEffectNoSchedule)
	NoExecute  Effect = Effect(resourceapi.DeviceTaintEffectNoExecute)
)

func (e Effect) rank() int {
	switch e {
	case NoExecute:
		return 3
	case NoSchedule:
		return 2
	case None:
		return 1
	}
	return 0
}

// Policy is the site's health policy.
type Policy struct {
	// XID classifies XID codes; codes not listed get DefaultXID.
	XID        map[int64]Effect
	DefaultXID Effect
	// CorrectedThreshold corrected errors (ECC single-bit, RAS ce) within
	// Window make a GPU "degrading" (NoSchedule).
	CorrectedThreshold int64
	// Window is the rate window of corrected errors, and how long a
	// clearable condition must see nothing new before it clears.
	Window time.Duration
}

// DefaultXIDs is the built-in classification, after NVIDIA's XID catalogue:
//
//	Ignore     13 graphics engine exception, 31 GPU memory page fault,
//	           43 GPU stopped processing, 45 preemptive cleanup,
//	           68 NVDEC0 exception, 109 context switch timeout: caused by
//	           the application, the GPU is fine
//	NoExecute  48 double-bit ECC error, 79 GPU has fallen off the bus,
//	           95 uncontained ECC error, 64 row remapper or page
//	           retirement recording failure: running work is unsafe
//	NoSchedule 63 page retirement or row remap recorded, 94 contained ECC
//	           error, 92 high single-bit ECC rate: work in flight may
//	           finish, the GPU needs a reset before new work
//
// Every other XID is None: published, with no effect.
func DefaultXIDs() map[int64]Effect {
	return map[int64]Effect{
		13: Ignore, 31: Ignore, 43: Ignore, 45: Ignore, 68: Ignore, 109: Ignore,
		48: NoExecute, 79: NoExecute, 95: NoExecute, 64: NoExecute,
		63: NoSchedule, 94: NoSchedule, 92: NoSchedule,
	}
}

// DefaultPolicy is the built-in policy.
func DefaultPolicy() Policy {
	return Policy{XID: DefaultXIDs(), DefaultXID: None, CorrectedThreshold: 10, Window: 10 * time.Minute}
}

// ParseXIDOverrides applies "code=Effect,..." (e.g. "43=NoSchedule,13=None")
// on top of the built-in table; the effect is one of Ignore, None,
// NoSchedule, NoExecute.
func ParseXIDOverrides(base map[int64]Effect, s string) (map[int64]Effect, error) {
	out := maps.Clone(base)
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return nil, fmt.Errorf("%q: want code=Effect", kv)
		}
		code, err := strconv.ParseInt(strings.TrimSpace(k), 10, 64)
		if err != nil || code <= 0 {
			return nil, fmt.Errorf("%q: XID code must be a positive number", kv)
		}
		e := Effect(strings.TrimSpace(v))
		if !slices.Contains([]Effect{Ignore, None, NoSchedule, NoExecute}, e) {
			return nil, fmt.Errorf("%q: effect must be Ignore, None, NoSchedule or NoExecute", kv)
		}
		out[code] = e
	}
	return out, nil
}

func (p *Policy) xid(code int64) Effect {
	if e, ok := p.XID[code]; ok {
		return e
	}
	if p.DefaultXID == "" {
		return None
	}
	return p.DefaultXID
}
