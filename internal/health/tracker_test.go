package health

import (
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func ev(kind backend.HealthKind, code, count int64, s int) backend.HealthEvent {
	return backend.HealthEvent{UUID: "GPU-1", Kind: kind, Code: code, Count: count, Time: at(s)}
}

// taints renders the GPU's taints as "key=value:Effect", sorted.
func taints(tr *Tracker) string {
	var out []string
	for _, t := range tr.Taints("GPU-1") {
		out = append(out, strings.TrimPrefix(t.Key, "gpu.tessera.dev/")+"="+t.Value+":"+string(t.Effect))
	}
	return strings.Join(out, ",")
}

func TestTracker(t *testing.T) {
	window := 100 * time.Second
	tests := []struct {
		name   string
		events []backend.HealthEvent
		expire int // seconds after t0 to run Expire at; 0: none
		want   string
		health inventory.HealthState
	}{
		{name: "nothing", want: "", health: inventory.Healthy},
		{name: "application XID changes nothing", events: []backend.HealthEvent{ev(backend.HealthXID, 13, 0, 1), ev(backend.HealthXID, 43, 0, 2)}, want: "", health: inventory.Healthy},
		{name: "XID 79 fallen off the bus", events: []backend.HealthEvent{ev(backend.HealthXID, 79, 0, 1)}, want: "xid=79:NoExecute", health: inventory.Unhealthy},
		{name: "contained ECC XID 94", events: []backend.HealthEvent{ev(backend.HealthXID, 94, 0, 1)}, want: "xid=94:NoSchedule", health: inventory.Unhealthy},
		{name: "unknown XID is visible only", events: []backend.HealthEvent{ev(backend.HealthXID, 999, 0, 1)}, want: "xid=999:None", health: inventory.Healthy},
		{name: "a lesser XID does not replace a worse one", events: []backend.HealthEvent{ev(backend.HealthXID, 79, 0, 1), ev(backend.HealthXID, 94, 0, 2)}, want: "xid=79:NoExecute", health: inventory.Unhealthy},
		{name: "a worse XID replaces a lesser one", events: []backend.HealthEvent{ev(backend.HealthXID, 94, 0, 1), ev(backend.HealthXID, 48, 0, 2)}, want: "xid=48:NoExecute", health: inventory.Unhealthy},
		{name: "NoSchedule XID clears after the window", events: []backend.HealthEvent{ev(backend.HealthXID, 94, 0, 1)}, expire: 101, want: "", health: inventory.Healthy},
		{name: "NoSchedule XID renewed stays", events: []backend.HealthEvent{ev(backend.HealthXID, 94, 0, 1), ev(backend.HealthXID, 94, 0, 60)}, expire: 101, want: "xid=94:NoSchedule", health: inventory.Unhealthy},
		{name: "NoExecute XID waits for the reset", events: []backend.HealthEvent{ev(backend.HealthXID, 79, 0, 1)}, expire: 10000, want: "xid=79:NoExecute", health: inventory.Unhealthy},
		{name: "recovered clears all", events: []backend.HealthEvent{ev(backend.HealthXID, 79, 0, 1), ev(backend.HealthLost, 0, 0, 2), ev(backend.HealthRecovered, 0, 0, 3)}, want: "", health: inventory.Healthy},
		{name: "lost", events: []backend.HealthEvent{ev(backend.HealthLost, 0, 0, 1)}, want: "lost=true:NoExecute", health: inventory.Unhealthy},
		{name: "double-bit ECC", events: []backend.HealthEvent{ev(backend.HealthECCDoubleBit, 0, 0, 0), ev(backend.HealthECCDoubleBit, 0, 1, 1)}, want: "ecc=uncorrectable:NoExecute", health: inventory.Unhealthy},
		{name: "double-bit counter reset with the GPU clears", events: []backend.HealthEvent{ev(backend.HealthECCDoubleBit, 0, 2, 1), ev(backend.HealthECCDoubleBit, 0, 0, 5)}, want: "", health: inventory.Healthy},
		{name: "AMD uncorrectable RAS", events: []backend.HealthEvent{ev(backend.HealthRASUncorrectable, 0, 3, 1)}, want: "ras=uncorrectable:NoExecute", health: inventory.Unhealthy},
		{name: "SBE ramp degrades", events: []backend.HealthEvent{ev(backend.HealthECCSingleBit, 0, 0, 0), ev(backend.HealthECCSingleBit, 0, 5, 10), ev(backend.HealthECCSingleBit, 0, 10, 20)}, want: "degrading=ecc-sbe:NoSchedule", health: inventory.Healthy},
		{name: "SBE below threshold", events: []backend.HealthEvent{ev(backend.HealthECCSingleBit, 0, 0, 0), ev(backend.HealthECCSingleBit, 0, 9, 10)}, want: "", health: inventory.Healthy},
		{name: "SBE spread over more than the window", events: []backend.HealthEvent{ev(backend.HealthECCSingleBit, 0, 0, 0), ev(backend.HealthECCSingleBit, 0, 6, 10), ev(backend.HealthECCSingleBit, 0, 12, 200)}, want: "", health: inventory.Healthy},
		{name: "old SBEs are a baseline, not a ramp", events: []backend.HealthEvent{ev(backend.HealthECCSingleBit, 0, 5000, 0), ev(backend.HealthECCSingleBit, 0, 5001, 10)}, want: "", health: inventory.Healthy},
		{name: "degrading clears when counters are stable for the window", events: []backend.HealthEvent{ev(backend.HealthECCSingleBit, 0, 0, 0), ev(backend.HealthECCSingleBit, 0, 10, 10)}, expire: 111, want: "", health: inventory.Healthy},
		{name: "AMD correctable RAS ramp", events: []backend.HealthEvent{ev(backend.HealthRASCorrectable, 0, 0, 0), ev(backend.HealthRASCorrectable, 0, 12, 5)}, want: "degrading=ras-ce:NoSchedule", health: inventory.Healthy},
		{name: "row remap pending, then done", events: []backend.HealthEvent{ev(backend.HealthRowRemapPending, 0, 1, 1), ev(backend.HealthRowRemapPending, 0, 0, 2)}, want: "", health: inventory.Healthy},
		{name: "row remap pending", events: []backend.HealthEvent{ev(backend.HealthRowRemapPending, 0, 1, 1)}, want: "row-remap=pending:NoSchedule", health: inventory.Unhealthy},
		{name: "row remap failure is not downgraded", events: []backend.HealthEvent{ev(backend.HealthRowRemapFailed, 0, 1, 1), ev(backend.HealthRowRemapPending, 0, 1, 2)}, want: "row-remap=failed:NoExecute", health: inventory.Unhealthy},
		{name: "retired pages pending", events: []backend.HealthEvent{ev(backend.HealthRetiredPagesPending, 0, 1, 1)}, want: "retired-pages=pending:NoSchedule", health: inventory.Unhealthy},
		{name: "several conditions", events: []backend.HealthEvent{ev(backend.HealthXID, 94, 0, 1), ev(backend.HealthLost, 0, 0, 2)}, want: "lost=true:NoExecute,xid=94:NoSchedule", health: inventory.Unhealthy},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultPolicy()
			p.Window = window
			tr := NewTracker(p)
			for _, e := range tc.events {
				tr.Observe("GPU-1", e)
			}
			if tc.expire > 0 {
				tr.Expire(at(tc.expire))
			}
			if got := taints(tr); got != tc.want {
				t.Errorf("taints %q, want %q", got, tc.want)
			}
			if h := tr.Health("GPU-1"); h.State != tc.health {
				t.Errorf("health %+v, want %s", h, tc.health)
			}
		})
	}
}

func TestObserveReportsChanges(t *testing.T) {
	tr := NewTracker(DefaultPolicy())
	steps := []struct {
		e    backend.HealthEvent
		want bool
	}{
		{ev(backend.HealthXID, 13, 0, 1), false},
		{ev(backend.HealthXID, 79, 0, 2), true},
		{ev(backend.HealthXID, 79, 0, 3), false}, // the same condition again
		{ev(backend.HealthRecovered, 0, 0, 4), true},
		{ev(backend.HealthRecovered, 0, 0, 5), false},
	}
	for i, s := range steps {
		if got := tr.Observe("GPU-1", s.e); got != s.want {
			t.Errorf("step %d (%s %d): changed %v, want %v", i, s.e.Kind, s.e.Code, got, s.want)
		}
	}
	// Taints of an unchanged condition are identical, so republishing them
	// writes nothing.
	tr.Observe("GPU-1", ev(backend.HealthXID, 79, 0, 10))
	a := tr.Taints("GPU-1")
	tr.Observe("GPU-1", ev(backend.HealthXID, 79, 0, 20))
	if b := tr.Taints("GPU-1"); !a[0].TimeAdded.Equal(b[0].TimeAdded) {
		t.Errorf("TimeAdded moved from %v to %v", a[0].TimeAdded, b[0].TimeAdded)
	}
}

func TestParseXIDOverrides(t *testing.T) {
	got, err := ParseXIDOverrides(DefaultXIDs(), "13=NoSchedule, 1000=NoExecute")
	if err != nil {
		t.Fatal(err)
	}
	if got[13] != NoSchedule || got[1000] != NoExecute || got[79] != NoExecute {
		t.Errorf("got %v", got)
	}
	if DefaultXIDs()[13] != Ignore {
		t.Error("base table changed")
	}
	for _, bad := range []string{"13", "x=None", "13=Maybe", "-1=None"} {
		if _, err := ParseXIDOverrides(DefaultXIDs(), bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
