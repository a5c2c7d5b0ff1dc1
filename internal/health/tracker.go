package health

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// Taint keys, one per kind of condition; the value says which.
const (
	KeyXID          = "gpu.tessera.dev/xid"           // the XID code
	KeyECC          = "gpu.tessera.dev/ecc"           // uncorrectable
	KeyRAS          = "gpu.tessera.dev/ras"           // uncorrectable
	KeyLost         = "gpu.tessera.dev/lost"          // true
	KeyRowRemap     = "gpu.tessera.dev/row-remap"     // pending, failed
	KeyRetiredPages = "gpu.tessera.dev/retired-pages" // pending
	KeyDegrading    = "gpu.tessera.dev/degrading"     // ecc-sbe, ras-ce
)

// Condition is one active health condition of a GPU: one taint.
type Condition struct {
	Key, Value string
	Effect     Effect
	// Since is when it was raised; Last when a signal last renewed it.
	Since, Last time.Time
	Message     string
	// clearable conditions go after Policy.Window without renewal.
	clearable bool
}

type sample struct {
	t     time.Time
	count int64
}

type gpuState struct {
	conds    map[string]*Condition
	counters map[backend.HealthKind][]sample
}

// Tracker keeps the conditions of every GPU. It is safe for concurrent use.
type Tracker struct {
	policy Policy
	mu     sync.Mutex
	gpus   map[string]*gpuState
}

// NewTracker returns a Tracker applying p.
func NewTracker(p Policy) *Tracker {
	if p.Window <= 0 {
		p.Window = DefaultPolicy().Window
	}
	return &Tracker{policy: p, gpus: map[string]*gpuState{}}
}

// Policy is the tracker's policy.
func (t *Tracker) Policy() Policy { return t.policy }

func (t *Tracker) state(gpu string) *gpuState {
	s, ok := t.gpus[gpu]
	if !ok {
		s = &gpuState{conds: map[string]*Condition{}, counters: map[backend.HealthKind][]sample{}}
		t.gpus[gpu] = s
	}
	return s
}

// Observe applies one signal of the GPU with UUID gpu (the caller maps a
// partition's signal to its GPU) and reports whether the GPU's conditions
// changed.
func (t *Tracker) Observe(gpu string, ev backend.HealthEvent) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.state(gpu)
	before := s.fingerprint()
	now := ev.Time
	if now.IsZero() {
		now = time.Now()
	}
	switch ev.Kind {
	case backend.HealthRecovered:
		s.conds = map[string]*Condition{}
		s.counters = map[backend.HealthKind][]sample{}
	case backend.HealthLost:
		s.raise(KeyLost, "true", NoExecute, false, now, msg(ev, "GPU lost"))
	case backend.HealthXID:
		t.xid(s, ev, now)
	case backend.HealthECCDoubleBit:
		if s.counted(ev, now) {
			s.raise(KeyECC, "uncorrectable", NoExecute, false, now, msg(ev, fmt.Sprintf("%d uncorrected ECC errors", ev.Count)))
		}
	case backend.HealthRASUncorrectable:
		if s.counted(ev, now) {
			s.raise(KeyRAS, "uncorrectable", NoExecute, false, now, msg(ev, fmt.Sprintf("%d uncorrectable RAS errors", ev.Count)))
		}
	case backend.HealthECCSingleBit, backend.HealthRASCorrectable:
		s.counted(ev, now)
		if n := s.rise(ev.Kind, now, t.policy.Window); t.policy.CorrectedThreshold > 0 && n >= t.policy.CorrectedThreshold {
			s.raise(KeyDegrading, string(ev.Kind), NoSchedule, true, now,
				fmt.Sprintf("degrading: %d corrected errors (%s) within %s (threshold %d)", n, ev.Kind, t.policy.Window, t.policy.CorrectedThreshold))
		}
	case backend.HealthRowRemapPending:
		s.flag(KeyRowRemap, "pending", ev.Count > 0, now, msg(ev, "row remapping pending a GPU reset"))
	case backend.HealthRowRemapFailed:
		if ev.Count > 0 {
			s.raise(KeyRowRemap, "failed", NoExecute, false, now, msg(ev, "row remapping failed"))
		}
	case backend.HealthRetiredPagesPending:
		s.flag(KeyRetiredPages, "pending", ev.Count > 0, now, msg(ev, "retired pages pending a GPU reset"))
	}
	return s.fingerprint() != before
}

func (t *Tracker) xid(s *gpuState, ev backend.HealthEvent, now time.Time) {
	e := t.policy.xid(ev.Code)
	if e == Ignore {
		return
	}
	m := msg(ev, fmt.Sprintf("XID %d", ev.Code))
	if cur, ok := s.conds[KeyXID]; ok && cur.Effect.rank() > e.rank() {
		return // a worse XID is already up; this one changes nothing
	}
	s.raise(KeyXID, strconv.FormatInt(ev.Code, 10), e, e != NoExecute, now, m)
}

// raise sets the condition of key, keeping Since while the value stays.
func (s *gpuState) raise(key, value string, e Effect, clearable bool, now time.Time, message string) {
	if cur, ok := s.conds[key]; ok && cur.Value == value && cur.Effect == e {
		cur.Last, cur.Message = now, message
		return
	}
	if cur, ok := s.conds[key]; ok && key == KeyRowRemap && cur.Value == "failed" && value == "pending" {
		return // a failure is not downgraded by a later pending report
	}
	s.conds[key] = &Condition{Key: key, Value: value, Effect: e, Since: now, Last: now, Message: message, clearable: clearable}
}

// flag raises a NoSchedule condition while a backend reports something
// pending, and clears it when it no longer is.
func (s *gpuState) flag(key, value string, on bool, now time.Time, message string) {
	if on {
		s.raise(key, value, NoSchedule, false, now, message)
		return
	}
	if cur, ok := s.conds[key]; ok && cur.Value == value {
		delete(s.conds, key)
	}
}

// counted records a cumulative counter and reports whether it rose. A
// counter that went down was reset with the GPU: the conditions counters
// raised clear, and it starts a new baseline.
func (s *gpuState) counted(ev backend.HealthEvent, now time.Time) bool {
	ss := s.counters[ev.Kind]
	prev := int64(0)
	if len(ss) > 0 {
		prev = ss[len(ss)-1].count
	}
	if ev.Count < prev {
		for _, k := range []string{KeyECC, KeyRAS, KeyDegrading} {
			delete(s.conds, k)
		}
		s.counters[ev.Kind] = []sample{{now, ev.Count}}
		return false
	}
	s.counters[ev.Kind] = append(ss, sample{now, ev.Count})
	return ev.Count > prev
}

// rise is how much a counter rose within the window ending now: from the
// last sample at or before the window's start (or the first one) to the
// newest. Older samples are dropped.
func (s *gpuState) rise(kind backend.HealthKind, now time.Time, window time.Duration) int64 {
	ss := s.counters[kind]
	if len(ss) == 0 {
		return 0
	}
	start := now.Add(-window)
	base := 0
	for i, x := range ss {
		if !x.t.After(start) {
			base = i
		}
	}
	ss = ss[base:]
	s.counters[kind] = ss
	return ss[len(ss)-1].count - ss[0].count
}

// Expire clears conditions that saw nothing new for the policy's window and
// reports which GPUs changed.
func (t *Tracker) Expire(now time.Time) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var changed []string
	for gpu, s := range t.gpus {
		for k, c := range s.conds {
			if c.clearable && now.Sub(c.Last) >= t.policy.Window {
				delete(s.conds, k)
				changed = append(changed, gpu)
			}
		}
	}
	sort.Strings(changed)
	return slices.Compact(changed)
}

// Conditions returns the GPU's conditions sorted by key.
func (t *Tracker) Conditions(gpu string) []Condition {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.gpus[gpu]
	if !ok {
		return nil
	}
	out := make([]Condition, 0, len(s.conds))
	for _, c := range s.conds {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Taints are the GPU's conditions as device taints, to publish on the GPU
// and its partitions. TimeAdded is the condition's Since to the second (as
// the API stores it), so an unchanged condition publishes identical taints.
func (t *Tracker) Taints(gpu string) []resourceapi.DeviceTaint {
	cs := t.Conditions(gpu)
	if len(cs) == 0 {
		return nil
	}
	out := make([]resourceapi.DeviceTaint, 0, len(cs))
	for _, c := range cs {
		at := metav1.NewTime(c.Since.Truncate(time.Second))
		out = append(out, resourceapi.DeviceTaint{Key: c.Key, Value: c.Value, Effect: resourceapi.DeviceTaintEffect(c.Effect), TimeAdded: &at})
	}
	return out
}

// Health is what the kubelet is told of the GPU: Unhealthy with a NoExecute
// or NoSchedule condition other than degradation, and the conditions in
// words.
func (t *Tracker) Health(gpu string) inventory.Health {
	cs := t.Conditions(gpu)
	h := inventory.Health{State: inventory.Healthy}
	var parts []string
	for _, c := range cs {
		if c.Key != KeyDegrading && (c.Effect == NoExecute || c.Effect == NoSchedule) {
			h.State = inventory.Unhealthy
		}
		parts = append(parts, fmt.Sprintf("%s=%s:%s (%s)", strings.TrimPrefix(c.Key, "gpu.tessera.dev/"), c.Value, c.Effect, c.Message))
	}
	h.Reason = strings.Join(parts, "; ")
	return h
}

func (s *gpuState) fingerprint() string {
	keys := make([]string, 0, len(s.conds))
	for k, c := range s.conds {
		keys = append(keys, k+"="+c.Value+":"+string(c.Effect))
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

func msg(ev backend.HealthEvent, fallback string) string {
	if ev.Message != "" {
		return ev.Message
	}
	return fallback
}
