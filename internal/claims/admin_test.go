package claims

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/names"
)

// adminClaim is a monitor's claim in namespace monitoring: request
// "monitor" allocated devices with adminAccess, as the scheduler records
// it.
func adminClaim(name string, devices ...string) *resourceapi.ResourceClaim {
	c := allocated(name, devices...)
	c.Namespace = "monitoring"
	yes := true
	for i := range c.Status.Allocation.Devices.Results {
		r := &c.Status.Allocation.Devices.Results[i]
		r.Request, r.AdminAccess = "monitor", &yes
	}
	c.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "monitor", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: names.DriverName, AdminAccess: &yes}}}
	return c
}

// nodesOf is the device nodes a runtime would give a container of ids.
func (e *env) nodesOf(ids []string) []string {
	e.t.Helper()
	var out []string
	for _, d := range e.injected(ids).Linux.Devices {
		out = append(out, d.Path)
	}
	slices.Sort(out)
	return out
}

func idsOf(devs []Device) []string {
	var out []string
	for _, d := range devs {
		out = append(out, d.CDIDeviceIDs...)
	}
	return out
}

// nodeState is what the holders of a GPU set on it, which a monitor must
// leave as it is.
type nodeState struct {
	interval   backend.TimeSlice
	partitions int
	migOn      bool
	daemons    int
}

func (e *env) stateOf(gpu string) nodeState {
	e.t.Helper()
	g := e.gpuState(gpu)
	s := nodeState{partitions: len(g.Partitions), migOn: g.Partitioning != nil && g.Partitioning.Enabled}
	if ts, err := e.sim.TimeSlice(gpu); err == nil {
		s.interval = ts
	}
	ds, err := e.sim.MPSDaemons(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	for _, d := range ds {
		if d.Running {
			s.daemons++
		}
	}
	return s
}

// TestAdminAccessWatchesHeldDevices: a monitor's claim prepares on devices
// other claims hold (a carved MIG slice with its GPU in MIG mode, a
// time-sliced GPU, a GPU under its claim's MPS daemon, a capacity share
// under the device's shared daemon), gets the holder's device nodes,
// changes nothing they set, is counted by none of the checks, and
// unprepares leaving the holder as it was; the holder then unprepares as
// if the monitor were not there, while the monitor is still prepared.
func TestAdminAccessWatchesHeldDevices(t *testing.T) {
	tests := []struct {
		name string
		env  func(t *testing.T) *env
		// holder is the claim the monitor watches; watched its devices
		// the monitor is allocated; gpu the GPU they are on.
		holder  *resourceapi.ResourceClaim
		watched []string
		gpu     string
	}{
		{
			name:    "carved MIG slice and its GPU whole",
			env:     func(t *testing.T) *env { return dynamicEnv(t, "dgx-h100") },
			holder:  allocated("slice", "gpu-7-mig-1g-10gb-6"),
			watched: []string{"gpu-7-mig-1g-10gb-6", "gpu-7"},
			gpu:     "gpu-7",
		},
		{
			name:    "time-sliced GPU",
			env:     func(t *testing.T) *env { return sharingEnv(t, "mixed-inference") },
			holder:  configured("ts", longSlice, "gpu-2"),
			watched: []string{"gpu-2"},
			gpu:     "gpu-2",
		},
		{
			name:    "GPU under its claim's MPS daemon",
			env:     func(t *testing.T) *env { return sharingEnv(t, "mixed-inference") },
			holder:  configured("mps", mpsHalf, "gpu-0"),
			watched: []string{"gpu-0"},
			gpu:     "gpu-0",
		},
		{
			name:    "capacity share",
			env:     func(t *testing.T) *env { return capacityEnv(t, "l4-4") },
			holder:  shareClaim("share", "gpu-0", "7Gi", 0),
			watched: []string{"gpu-0"},
			gpu:     "gpu-0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.env(t)
			m, res := e.start(nil)
			ctx := ctxFor(t)
			gpu := res.Devices[tt.gpu].GPU.UUID
			held, err := m.Prepare(ctx, tt.holder)
			if err != nil {
				t.Fatalf("holder: %v", err)
			}
			before, whole := e.stateOf(gpu), m.HoldsWhole(gpu)
			monitor := adminClaim("dcgm", tt.watched...)
			devs, err := m.Prepare(ctx, monitor)
			if err != nil {
				t.Fatalf("monitor beside the holder: %v", err)
			}
			if got := e.stateOf(gpu); got != before {
				t.Errorf("the monitor's prepare changed the GPU: %+v, was %+v", got, before)
			}
			// The monitor gets every node the holder's container got.
			mine := e.nodesOf(idsOf(devs))
			for _, n := range e.nodesOf(idsOf(held)) {
				if !slices.Contains(mine, n) {
					t.Errorf("the monitor's container lacks %s (it has %v)", n, mine)
				}
			}
			rec := m.Prepared()["uid-dcgm"]
			for _, d := range rec.Devices {
				if !d.AdminAccess || d.Sharing != nil || d.Placement != nil || d.CreatedPartition || d.VFIO != nil {
					t.Errorf("the monitor's record of %s holds something: %+v", d.Device, d)
				}
			}
			// Nothing counts the monitor as a holder.
			if got := m.HoldsWhole(gpu); got != whole {
				t.Errorf("HoldsWhole(%s) = %v beside the monitor, %v before it", tt.gpu, got, whole)
			}
			if _, ok := m.HeldDevices()[ClaimRef{"monitoring", "dcgm"}]; ok {
				t.Error("HeldDevices lists the monitor's claim: its pod would be shown using the GPU")
			}
			// The kubelet asks again: answered from the checkpoint.
			if _, err := m.Prepare(ctx, monitor); err != nil {
				t.Fatalf("monitor again: %v", err)
			}
			if err := m.Unprepare(ctx, "uid-dcgm", "monitoring", "dcgm"); err != nil {
				t.Fatalf("unprepare monitor: %v", err)
			}
			if got := e.stateOf(gpu); got != before {
				t.Errorf("the monitor's unprepare changed the GPU: %+v, was %+v", got, before)
			}
			if _, ok := m.Prepared()[string(tt.holder.UID)]; !ok || !e.hasSpec(string(tt.holder.UID)) {
				t.Error("the monitor's unprepare took the holder's entry or spec")
			}

			// The monitor again, then the holder goes first.
			if _, err := m.Prepare(ctx, monitor); err != nil {
				t.Fatalf("monitor, second time: %v", err)
			}
			if err := m.Unprepare(ctx, string(tt.holder.UID), tt.holder.Namespace, tt.holder.Name); err != nil {
				t.Fatalf("holder's unprepare beside the monitor: %v", err)
			}
			// What the node had before any claim: the monitor keeps
			// nothing of what the holder set.
			if got, want := e.stateOf(gpu), (nodeState{interval: backend.TimeSliceDefault}); got != want {
				t.Errorf("after the holder's unprepare: %+v, want %+v", got, want)
			}
			if err := m.Unprepare(ctx, "uid-dcgm", "monitoring", "dcgm"); err != nil {
				t.Fatalf("monitor's unprepare after its holder's: %v", err)
			}
			if len(m.Prepared()) != 0 || len(e.specFiles()) != 0 {
				t.Errorf("left %d claims, specs %v", len(m.Prepared()), e.specFiles())
			}
		})
	}
}

// TestAdminAccessFirst: a monitor prepared before any claim holds its
// devices neither blocks nor yields to the claims the scheduler gives them
// to, even an agent that may release stale claims (every claim it asks
// about is gone) and one restarted after a reboot (every claim it records
// is unconfirmed).
func TestAdminAccessFirst(t *testing.T) {
	for _, reboot := range []bool{false, true} {
		t.Run(map[bool]string{false: "running", true: "after a reboot"}[reboot], func(t *testing.T) {
			e := dynamicEnv(t, "dgx-h100")
			released := 0
			e.getClaim = func(_ context.Context, ns, name string) (*resourceapi.ResourceClaim, error) {
				return nil, apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, name)
			}
			e.released = func(Evidence, string, ClaimRef) { released++ }
			m, res := e.start(nil)
			ctx := ctxFor(t)
			if _, err := m.Prepare(ctx, adminClaim("dcgm", "gpu-6", "gpu-7")); err != nil {
				t.Fatal(err)
			}
			if reboot {
				e.bootID = "boot-2"
				m, res = e.start(nil)
			}
			gpu := res.Devices["gpu-7"].GPU.UUID
			if _, err := m.Prepare(ctx, allocated("whole", "gpu-6")); err != nil {
				t.Fatalf("a whole GPU the monitor watches: %v", err)
			}
			if _, err := m.Prepare(ctx, allocated("slice", "gpu-7-mig-3g-40gb-4")); err != nil {
				t.Fatalf("a slice of a GPU the monitor watches: %v", err)
			}
			if !e.stateOf(gpu).migOn {
				t.Error("the slice's GPU is not in MIG mode")
			}
			if released != 0 {
				t.Errorf("%d stale claims released: the monitor was taken for a holder", released)
			}
			if _, ok := m.Prepared()["uid-dcgm"]; !ok {
				t.Error("the monitor's claim yielded its devices to their holders")
			}
		})
	}
}

// TestAdminAccessRefused: an admin-access request that would change its
// device is refused, naming the claim, the request and the field, and
// leaves nothing behind; a config addressed to another request of the
// claim leaves it alone.
func TestAdminAccessRefused(t *testing.T) {
	withAdminConfig := func(c *resourceapi.ResourceClaim, class bool) *resourceapi.ResourceClaim {
		withConfig(c, "GpuConfig", `{"strategy":"TimeSlicing","timeSlicing":{"interval":"Long"}}`, class)
		if !class {
			c.Status.Allocation.Devices.Config[0].Requests = []string{"monitor"}
		}
		return c
	}
	tests := []struct {
		name  string
		env   func(t *testing.T) *env
		claim *resourceapi.ResourceClaim
		kind  error
		want  []string // in the error
	}{
		{
			name:  "claim's config",
			env:   func(t *testing.T) *env { return sharingEnv(t, "mixed-inference") },
			claim: withAdminConfig(adminClaim("dcgm", "gpu-2"), false),
			kind:  ErrConfigRejected,
			want:  []string{"monitoring/dcgm", `request "monitor" has adminAccess`, "status.allocation.devices.config[0] (from claim)"},
		},
		{
			name:  "class's config",
			env:   func(t *testing.T) *env { return sharingEnv(t, "mixed-inference") },
			claim: withAdminConfig(adminClaim("dcgm", "gpu-2"), true),
			kind:  ErrConfigRejected,
			want:  []string{"monitoring/dcgm", "status.allocation.devices.config[0] (from class)"},
		},
		{
			name: "passthrough class",
			env:  func(t *testing.T) *env { return passthroughEnv(t, "dgx-h100") },
			claim: func() *resourceapi.ResourceClaim {
				c := adminClaim("dcgm", "gpu-3")
				c.Spec.Devices.Requests[0].Exactly.DeviceClassName = names.VFIOClass
				return c
			}(),
			kind: ErrConfigRejected,
			want: []string{"monitoring/dcgm", "spec.devices.requests[monitor].deviceClassName", names.VFIOClass},
		},
		{
			name:  "MIG placement nothing is carved at",
			env:   func(t *testing.T) *env { return dynamicEnv(t, "dgx-h100") },
			claim: adminClaim("dcgm", "gpu-7-mig-1g-10gb-6"),
			kind:  ErrConfigRejected,
			want:  []string{"monitoring/dcgm", "gpu-7-mig-1g-10gb-6", "carves nothing"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.env(t)
			m, _ := e.start(nil)
			_, err := m.Prepare(ctxFor(t), tt.claim)
			if !errors.Is(err, tt.kind) {
				t.Fatalf("err %v, want %v", err, tt.kind)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if len(m.Prepared()) != 0 || len(e.specFiles()) != 0 || e.totalPartitions() != 0 {
				t.Errorf("a refusal left claims %v, specs %v, %d partitions", m.Prepared(), e.specFiles(), e.totalPartitions())
			}
		})
	}

	t.Run("config of another request", func(t *testing.T) {
		e := sharingEnv(t, "mixed-inference")
		m, res := e.start(nil)
		c := configured("mixed", longSlice, "gpu-2")
		yes := true
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: "monitor", Driver: driverName, Pool: nodeName, Device: "gpu-3", AdminAccess: &yes,
		})
		if _, err := m.Prepare(ctxFor(t), c); err != nil {
			t.Fatal(err)
		}
		if got := e.timeSlice(res.Devices["gpu-2"].GPU.UUID); got != backend.TimeSliceLong {
			t.Errorf("the held GPU's interval %s, want Long", got)
		}
		if got := e.timeSlice(res.Devices["gpu-3"].GPU.UUID); got != backend.TimeSliceDefault {
			t.Errorf("the watched GPU's interval %s, want Default", got)
		}
		if err := m.Unprepare(ctxFor(t), "uid-mixed", "default", "mixed"); err != nil {
			t.Fatal(err)
		}
		if got := e.timeSlice(res.Devices["gpu-2"].GPU.UUID); got != backend.TimeSliceDefault {
			t.Errorf("after unprepare the interval is %s, want Default", got)
		}
	})
}

// TestAdminAccessRebuiltFromSpecs: a checkpoint rebuilt from the claims'
// specs still knows the monitor's devices are watched: the slice it
// watches is its holder's to destroy, and its unprepare destroys nothing.
func TestAdminAccessRebuiltFromSpecs(t *testing.T) {
	e := dynamicEnv(t, "dgx-h100")
	m, res := e.start(nil)
	ctx := ctxFor(t)
	gpu := res.Devices["gpu-7"].GPU.UUID
	if _, err := m.Prepare(ctx, allocated("slice", "gpu-7-mig-1g-10gb-6")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Prepare(ctx, adminClaim("dcgm", "gpu-7-mig-1g-10gb-6")); err != nil {
		t.Fatal(err)
	}
	e.corruptCheckpoint("not json")
	m, _ = e.start(nil)
	rec := m.Prepared()["uid-dcgm"].Devices[0]
	if !rec.AdminAccess || rec.CreatedPartition || rec.Placement != nil {
		t.Fatalf("the monitor's device rebuilt as %+v", rec)
	}
	if err := m.Unprepare(ctx, "uid-dcgm", "monitoring", "dcgm"); err != nil {
		t.Fatal(err)
	}
	if n := len(e.gpuState(gpu).Partitions); n != 1 {
		t.Fatalf("%d partitions after the monitor's unprepare, want the holder's 1", n)
	}
	if err := m.Unprepare(ctx, "uid-slice", "default", "slice"); err != nil {
		t.Fatal(err)
	}
	if n := e.totalPartitions(); n != 0 {
		t.Errorf("%d partitions after the holder's unprepare, want 0", n)
	}
}
