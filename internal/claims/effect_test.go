package claims

import (
	"fmt"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// TestEffectLists: every effect is applied and undone, once each.
func TestEffectLists(t *testing.T) {
	name := func(e effect) string { return fmt.Sprintf("%T", e) }
	var applied, undone []string
	for _, e := range effects {
		applied = append(applied, name(e))
	}
	for _, e := range undoOrder {
		undone = append(undone, name(e))
	}
	slices.Sort(applied)
	slices.Sort(undone)
	if !slices.Equal(applied, undone) || len(slices.Compact(slices.Clone(applied))) != len(applied) {
		t.Fatalf("effects %v, undoOrder %v: want the same effects, each once", applied, undone)
	}
}

// TestEffectPlan: what each effect records before prepare acts, and
// whether it acts, for each kind of device alone.
func TestEffectPlan(t *testing.T) {
	placement := func(rec checkpoint.Device) string {
		if rec.Placement == nil {
			return rec.Profile
		}
		return fmt.Sprintf("%s@%d", rec.Profile, rec.Placement.Start)
	}
	cases := []struct {
		name  string
		env   func(t *testing.T) *env
		claim *resourceapi.ResourceClaim
		// plans and holds are, per effect in effects' order, whether it
		// acts at prepare and whether the record then says it holds
		// something to undo (a whole GPU's mode switch leaves nothing).
		plans, holds  [5]bool
		wantPlacement string
	}{
		{"static whole GPU", func(t *testing.T) *env { return newEnv(t, "dgx-h100") }, allocated("c", "gpu-2"), [5]bool{}, [5]bool{}, ""},
		{"dynamic placement", func(t *testing.T) *env { return dynamicEnv(t, "dgx-h100") }, allocated("c", "gpu-7-mig-1g-10gb-6"), [5]bool{true, false, false, false, false}, [5]bool{true, false, false, false, false}, "1g.10gb@6"},
		{"dynamic whole GPU", func(t *testing.T) *env { return dynamicEnv(t, "dgx-h100") }, allocated("c", "gpu-5"), [5]bool{true, false, false, false, false}, [5]bool{}, ""},
		{"interval", func(t *testing.T) *env { return sharingEnv(t, "mixed-inference") }, configured("c", longSlice, "gpu-2"), [5]bool{false, false, true, false, false}, [5]bool{false, false, true, false, false}, ""},
		{"MPS", func(t *testing.T) *env { return sharingEnv(t, "mixed-inference") }, configured("c", mpsHalf, "gpu-0"), [5]bool{false, false, false, true, false}, [5]bool{false, false, false, true, false}, ""},
		{"enforced share", func(t *testing.T) *env { return capacityEnv(t, "l4-4") }, shareClaim("c", "gpu-0", "7Gi", 10), [5]bool{false, false, false, true, false}, [5]bool{false, false, false, true, false}, ""},
		{"passthrough", func(t *testing.T) *env { return passthroughEnv(t, "dgx-h100") }, vfioClaim("c", "gpu-3"), [5]bool{false, true, false, false, false}, [5]bool{false, true, false, false, false}, ""},
		{"dynamic passthrough", func(t *testing.T) *env {
			e := passthroughEnv(t, "dgx-h100")
			e.partitioning = publish.Dynamic
			return e
		}, vfioClaim("c", "gpu-3"), [5]bool{true, true, false, false, false}, [5]bool{false, true, false, false, false}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := tc.env(t).start(nil)
			devs := mustAdmit(t, m, tc.claim)
			entry := &checkpoint.Claim{UID: "uid-c"}
			if got, want := m.plan(entry, devs), slices.Contains(tc.plans[:], true); got != want {
				t.Errorf("plan reports changes %v, want %v", got, want)
			}
			rec := entry.Devices[0]
			if got := placement(rec); got != tc.wantPlacement {
				t.Errorf("recorded placement %q, want %q", got, tc.wantPlacement)
			}
			for i, e := range effects {
				var own checkpoint.Device
				if got := e.plan(m, &devs[0], &own); got != tc.plans[i] {
					t.Errorf("%T plans %v, want %v", e, got, tc.plans[i])
				}
				if got := e.holds(rec); got != tc.holds[i] {
					t.Errorf("%T holds %v for the record %+v, want %v", e, got, rec, tc.holds[i])
				}
			}
			if got, want := holdsEffects(entry), slices.Contains(tc.holds[:], true); got != want {
				t.Errorf("holdsEffects %v, want %v", got, want)
			}
		})
	}
}

// TestEffectApplyUndo applies one effect alone for a claim on the
// simulator, checks the node, undoes it and checks the node is as before;
// undo again changes nothing (rollback reruns after a crash).
func TestEffectApplyUndo(t *testing.T) {
	var limits limitNode // the memory limits case's node
	cases := []struct {
		name    string
		effect  effect
		env     func(t *testing.T) *env
		claim   *resourceapi.ResourceClaim
		applied func(e *env, m *Manager, entry *checkpoint.Claim) error
		undone  func(e *env, m *Manager, entry *checkpoint.Claim) error
	}{
		{"partitions", partitions{}, func(t *testing.T) *env { return dynamicEnv(t, "dgx-h100") },
			allocated("c", "gpu-7-mig-1g-10gb-6", "gpu-7-mig-3g-40gb-0"),
			func(e *env, m *Manager, entry *checkpoint.Claim) error {
				if n := e.totalPartitions(); n != 2 {
					return fmt.Errorf("%d partitions, want 2", n)
				}
				for _, d := range entry.Devices {
					if !d.CreatedPartition || d.PartitionUUID == "" {
						return fmt.Errorf("device %s not recorded carved: %+v", d.Device, d)
					}
				}
				if g := e.gpuState(entry.Devices[0].GPUUUID); !g.Partitioning.Enabled || !slices.Contains(m.cp.PartitionModeOn, g.UUID) {
					return fmt.Errorf("MIG mode %v, recorded on %v", g.Partitioning.Enabled, m.cp.PartitionModeOn)
				}
				return nil
			},
			func(e *env, m *Manager, entry *checkpoint.Claim) error {
				if n := e.totalPartitions(); n != 0 {
					return fmt.Errorf("%d partitions left", n)
				}
				if g := e.gpuState(entry.Devices[0].GPUUUID); g.Partitioning.Enabled || len(m.cp.PartitionModeOn) != 0 {
					return fmt.Errorf("MIG mode %v, recorded on %v", g.Partitioning.Enabled, m.cp.PartitionModeOn)
				}
				return nil
			}},
		{"intervals", intervals{}, func(t *testing.T) *env { return sharingEnv(t, "mixed-inference") },
			configured("c", longSlice, "gpu-2"),
			func(e *env, m *Manager, entry *checkpoint.Claim) error {
				if ts := e.timeSlice(entry.Devices[0].GPUUUID); ts != backend.TimeSliceLong {
					return fmt.Errorf("interval %s, want Long", ts)
				}
				return nil
			},
			func(e *env, m *Manager, entry *checkpoint.Claim) error {
				if ts := e.timeSlice(entry.Devices[0].GPUUUID); ts != backend.TimeSliceDefault {
					return fmt.Errorf("interval %s, want the default", ts)
				}
				return nil
			}},
		{"memory limits", memoryLimits{}, func(t *testing.T) *env {
			// The hook held a limit for a container of the claim whose
			// poststop never ran, and one for another claim's.
			e := newEnv(t, "dgx-h100")
			limits = newLimitNode(t)
			limits.hold(t, "uid-c", "gpu-2")
			limits.hold(t, "uid-other", "gpu-5")
			e.releaseLimits = limits.release
			return e
		}, allocated("c", "gpu-2"),
			func(e *env, m *Manager, entry *checkpoint.Claim) error {
				if recs := limits.records(t); len(recs) != 2 {
					return fmt.Errorf("records %+v, want both: prepare leaves them to the hook", recs)
				}
				return nil
			},
			func(e *env, m *Manager, entry *checkpoint.Claim) error {
				if recs := limits.records(t); len(recs) != 1 || recs[0].ClaimUID != "uid-other" {
					return fmt.Errorf("records %+v, want the other claim's alone", recs)
				}
				return nil
			}},
		{"passthrough", passthrough{}, func(t *testing.T) *env { return passthroughEnv(t, "mi300x-8") },
			vfioClaim("c", "gpu-5"),
			func(e *env, m *Manager, entry *checkpoint.Claim) error {
				return e.driverIs(entry.Devices[0], "vfio-pci", true)
			},
			func(e *env, m *Manager, entry *checkpoint.Claim) error {
				return e.driverIs(entry.Devices[0], "amdgpu", false)
			}},
		{"MPS daemons", mpsDaemons{}, func(t *testing.T) *env { return sharingEnv(t, "mixed-inference") },
			configured("c", mpsHalf, "gpu-0"),
			func(e *env, m *Manager, entry *checkpoint.Claim) error {
				if d, ok := e.daemon("uid-c"); !ok || !d.Running {
					return fmt.Errorf("daemon %+v (known %v), want running", d, ok)
				}
				return nil
			},
			func(e *env, m *Manager, entry *checkpoint.Claim) error {
				if d, ok := e.daemon("uid-c"); ok {
					return fmt.Errorf("daemon %+v left", d)
				}
				return nil
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.env(t)
			m, _ := e.start(nil)
			ctx := ctxFor(t)
			devs := mustAdmit(t, m, tc.claim)
			entry := &checkpoint.Claim{UID: "uid-c", Namespace: "default", Name: "c", State: checkpoint.PrepareStarted}
			m.mu.Lock()
			defer m.mu.Unlock()
			m.plan(entry, devs)
			m.cp.Claims[entry.UID] = entry
			m.touch(entry.UID) // planted: written with the next save
			if err := tc.effect.apply(ctx, m, entry, devs); err != nil {
				t.Fatalf("apply: %v", err)
			}
			if err := tc.applied(e, m, entry); err != nil {
				t.Fatalf("after apply: %v", err)
			}
			for i := range 2 {
				if err := tc.effect.undo(ctx, m, entry); err != nil {
					t.Fatalf("undo %d: %v", i+1, err)
				}
				if err := tc.undone(e, m, entry); err != nil {
					t.Fatalf("after undo %d: %v", i+1, err)
				}
			}
		})
	}
}

// TestEffectUndoKeepsWhatOthersHold: an interval or a shared daemon
// another prepared claim holds stays when one claim's effect is undone.
func TestEffectUndoKeepsWhatOthersHold(t *testing.T) {
	cases := []struct {
		name   string
		effect effect
		env    func(t *testing.T) *env
		claims func() []*resourceapi.ResourceClaim
		held   func(e *env, res *publish.Result) error
	}{
		{"intervals", intervals{}, func(t *testing.T) *env { return sharingEnv(t, "mixed-inference") },
			func() []*resourceapi.ResourceClaim {
				return []*resourceapi.ResourceClaim{configured("a", longSlice, "gpu-2"), configured("b", longSlice, "gpu-2")}
			},
			func(e *env, res *publish.Result) error {
				if ts := e.timeSlice(res.Devices["gpu-2"].GPU.UUID); ts != backend.TimeSliceLong {
					return fmt.Errorf("interval %s, want Long: the other claim holds it", ts)
				}
				return nil
			}},
		{"MPS daemons", mpsDaemons{}, func(t *testing.T) *env { return capacityEnv(t, "l4-4") },
			func() []*resourceapi.ResourceClaim {
				return []*resourceapi.ResourceClaim{shareClaim("a", "gpu-0", "7Gi", 10), shareClaim("b", "gpu-0", "7Gi", 10)}
			},
			func(e *env, res *publish.Result) error {
				if running, _ := e.sharedDaemon(res.Devices["gpu-0"].GPU.UUID); !running {
					return fmt.Errorf("shared daemon stopped: the other share runs under it")
				}
				return nil
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.env(t)
			m, res := e.start(nil)
			ctx := ctxFor(t)
			for _, c := range tc.claims() {
				// Two claims on one GPU are refused only by the scheduler
				// (shares) or by an interval conflict; here both are
				// recorded as their prepares would leave them.
				devs := mustResolve(t, m, c)
				entry := &checkpoint.Claim{UID: string(c.UID), Namespace: c.Namespace, Name: c.Name, State: checkpoint.PrepareCompleted}
				m.mu.Lock()
				m.plan(entry, devs)
				m.cp.Claims[entry.UID] = entry
				m.touch(entry.UID) // planted: written with the next save
				err := tc.effect.apply(ctx, m, entry, devs)
				m.mu.Unlock()
				if err != nil {
					t.Fatalf("apply %s: %v", c.Name, err)
				}
			}
			m.mu.Lock()
			err := tc.effect.undo(ctx, m, m.cp.Claims["uid-a"])
			m.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.held(e, res); err != nil {
				t.Error(err)
			}
		})
	}
}
