package sim

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/mps"
	"github.com/tessera-gpu/tessera/internal/sim/standin"
	"github.com/tessera-gpu/tessera/internal/sim/standin/standintest"
)

// TestMain lets the test binary be the MPS control stand-in (standintest).
func TestMain(m *testing.M) { standintest.Main(m) }

func TestSetTimeSlice(t *testing.T) {
	mixed := mustProfile(t, "mixed-inference") // 2x A100, 2x T4, 1x MI210
	a100, t4, mi210 := mixed.Node.GPUs[0].UUID, mixed.Node.GPUs[2].UUID, mixed.Node.GPUs[4].UUID
	mig := mustProfile(t, "dgx-h100-mig")
	migGPU := mig.Node.GPUs[6]
	tests := []struct {
		name    string
		m       *Machine
		gpu     string
		ts      backend.TimeSlice
		want    string // inventory.GPU.TimeSlice after
		wantErr string
		notSupp bool // error wraps ErrSharingNotSupported
	}{
		{name: "NVIDIA long", m: mixed, gpu: a100, ts: backend.TimeSliceLong, want: "Long"},
		{name: "NVIDIA short", m: mixed, gpu: t4, ts: backend.TimeSliceShort, want: "Short"},
		{name: "NVIDIA default", m: mixed, gpu: a100, ts: backend.TimeSliceDefault, want: ""},
		{name: "AMD default", m: mixed, gpu: mi210, ts: backend.TimeSliceDefault, want: ""},
		{name: "AMD medium", m: mixed, gpu: mi210, ts: backend.TimeSliceMedium, wantErr: "fixed interval", notSupp: true},
		{name: "unknown GPU", m: mixed, gpu: "GPU-nope", ts: backend.TimeSliceLong, wantErr: "no GPU"},
		{name: "MIG partition", m: mig, gpu: migGPU.Partitions[0].UUID, ts: backend.TimeSliceLong, wantErr: "whole GPUs"},
		{name: "out of range", m: mixed, gpu: a100, ts: backend.TimeSlice(4), wantErr: "not one of"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			b, _ := newBackend(t, tt.m)
			err := b.SetTimeSlice(ctx, tt.gpu, tt.ts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), tt.gpu) {
					t.Fatalf("SetTimeSlice: %v, want an error naming %s with %q", err, tt.gpu, tt.wantErr)
				}
				if errors.Is(err, backend.ErrSharingNotSupported) != tt.notSupp {
					t.Errorf("errors.Is(%v, ErrSharingNotSupported) = %v, want %v", err, !tt.notSupp, tt.notSupp)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			g := discover(t, b).GPUs[tt.m.GPUIndex(tt.gpu)]
			if g.TimeSlice != tt.want {
				t.Errorf("Discover: TimeSlice %q, want %q", g.TimeSlice, tt.want)
			}
			if got, err := b.TimeSlice(tt.gpu); err != nil || got != tt.ts {
				t.Errorf("TimeSlice = %s, %v; want %s", got, err, tt.ts)
			}
		})
	}
}

// The interval survives a restart of the agent, not a reboot; state files
// from before the field load.
func TestTimeSlicePersists(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	m := mustProfile(t, "mixed-inference")
	gpu := m.Node.GPUs[1].UUID
	dir := t.TempDir()
	b, err := New(m, dir, WithBootID("boot-1"), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetTimeSlice(ctx, gpu, backend.TimeSliceMedium); err != nil {
		t.Fatal(err)
	}
	var doc stateDoc
	data, _ := os.ReadFile(filepath.Join(dir, stateFileName))
	if err := json.Unmarshal(data, &doc); err != nil || doc.GPUs[1].TimeSlice != "Medium" {
		t.Fatalf("state.json GPU 1 %+v, %v: want timeSlice Medium", doc.GPUs[1], err)
	}

	restarted, err := New(m, dir, WithBootID("boot-1"), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := discover(t, restarted).GPUs[1].TimeSlice; got != "Medium" {
		t.Errorf("after a restart TimeSlice %q, want Medium", got)
	}

	// A file written before the field existed has no timeSlice keys.
	var generic map[string]any
	if err := json.Unmarshal(data, &generic); err != nil {
		t.Fatal(err)
	}
	for _, g := range generic["gpus"].([]any) {
		delete(g.(map[string]any), "timeSlice")
	}
	old, _ := json.Marshal(generic)
	if err := os.WriteFile(filepath.Join(dir, stateFileName), old, 0o644); err != nil {
		t.Fatal(err)
	}
	fromOld, err := New(m, dir, WithBootID("boot-1"), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := discover(t, fromOld).GPUs[1].TimeSlice; got != "" {
		t.Errorf("old state file: TimeSlice %q, want the default", got)
	}
	if got := string(mustRead(t, filepath.Join(dir, stateFileName))); !strings.Contains(got, `"bootID": "boot-1"`) {
		t.Errorf("old state file was not kept (reset instead?):\n%s", got)
	}

	if err := restarted.SetTimeSlice(ctx, gpu, backend.TimeSliceLong); err != nil {
		t.Fatal(err)
	}
	rebooted, err := New(m, dir, WithBootID("boot-2"), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := discover(t, rebooted).GPUs[1].TimeSlice; got != "" {
		t.Errorf("after a reboot TimeSlice %q, want the default", got)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// mpsBackend is a backend on m with MPS daemons under a fresh root, the
// test binary as the control program; daemons left are stopped at the end.
func mpsBackend(t *testing.T, m *Machine) (*Backend, string) {
	t.Helper()
	root := t.TempDir()
	b, err := New(m, t.TempDir(), WithBootID("boot-1"), testLogger(t), WithMPS(root, standintest.Control(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ds, _ := b.MPSDaemons(context.Background())
		for _, d := range ds {
			if err := b.StopMPS(context.Background(), d.ID); err != nil {
				t.Error(err)
			}
		}
	})
	return b, root
}

func TestMPS(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	m := mustProfile(t, "dgx-h100-mig")
	b, root := mpsBackend(t, m)
	gpu, part := m.Node.GPUs[0].UUID, m.Node.GPUs[6].Partitions[2].UUID
	spec := mps.DaemonSpec{
		ID: "claim-1", Devices: []string{part, gpu}, ActiveThreadPercentage: 25,
		PinnedMemoryLimits: map[string]int64{part: 5 << 30},
	}
	d, err := b.StartMPS(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if d.Adopted || d.PID <= 0 || d.PipeDir != filepath.Join(root, "claim-1", "pipe") {
		t.Fatalf("StartMPS = %+v", d)
	}
	st, err := standin.ReadStatus(d.PipeDir)
	if err != nil {
		t.Fatal(err)
	}
	wantCmds := []string{
		"get_default_active_thread_percentage",
		"set_default_active_thread_percentage 25",
		"set_default_device_pinned_mem_limit " + part + " 5120M",
	}
	if !slices.Equal(st.Devices, spec.Devices) || !slices.Equal(st.Commands, wantCmds) {
		t.Errorf("daemon devices %v commands %q; want %v %q", st.Devices, st.Commands, spec.Devices, wantCmds)
	}
	if ds, err := b.MPSDaemons(ctx); err != nil || !slices.Equal(ds, []mps.DaemonState{{ID: "claim-1", Running: true}}) {
		t.Errorf("MPSDaemons = %+v, %v", ds, err)
	}
	if again, err := b.StartMPS(ctx, spec); err != nil || !again.Adopted || again.PID != d.PID {
		t.Errorf("second StartMPS = %+v, %v; want the daemon adopted", again, err)
	}
	if err := b.StopMPS(ctx, "claim-1"); err != nil {
		t.Fatal(err)
	}
	if ds, err := b.MPSDaemons(ctx); err != nil || len(ds) != 0 {
		t.Errorf("MPSDaemons after StopMPS = %+v, %v", ds, err)
	}
	if err := b.StopMPS(ctx, "claim-1"); err != nil {
		t.Errorf("StopMPS of a stopped daemon: %v", err)
	}
}

func TestMPSRefused(t *testing.T) {
	mixed := mustProfile(t, "mixed-inference")
	a100, mi210 := mixed.Node.GPUs[0].UUID, mixed.Node.GPUs[4].UUID
	mi300x := enableAll(mustProfile(t, "mi300x-8"))
	tests := []struct {
		name    string
		m       *Machine
		devices func(b *Backend) []string
		noMPS   bool // backend without WithMPS
		want    string
		notSupp bool
	}{
		{name: "AMD GPU", m: mixed, devices: func(*Backend) []string { return []string{a100, mi210} }, want: mi210, notSupp: true},
		{name: "AMD GPU without MPS configured", m: mixed, noMPS: true, devices: func(*Backend) []string { return []string{mi210} }, want: mi210, notSupp: true},
		{name: "AMD partition", m: mi300x, devices: func(b *Backend) []string {
			p, err := b.CreatePartition(context.Background(), mi300x.Node.GPUs[0].UUID, "CPX", inventory.Placement{Start: 0})
			if err != nil {
				t.Fatal(err)
			}
			return []string{p.UUID}
		}, want: "AMD GPUs share by time-slicing", notSupp: true},
		{name: "unknown device", m: mixed, devices: func(*Backend) []string { return []string{a100, "GPU-nope"} }, want: "no GPU or partition GPU-nope"},
		{name: "not configured", m: mixed, noMPS: true, devices: func(*Backend) []string { return []string{a100} }, want: "sim.WithMPS"},
		{name: "bad spec", m: mixed, devices: func(*Backend) []string { return []string{a100, a100} }, want: "twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			var b *Backend
			if tt.noMPS {
				b, _ = newBackend(t, tt.m)
			} else {
				b, _ = mpsBackend(t, tt.m)
			}
			_, err := b.StartMPS(ctx, mps.DaemonSpec{ID: "claim-1", Devices: tt.devices(b)})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("StartMPS: %v, want an error with %q", err, tt.want)
			}
			if errors.Is(err, backend.ErrSharingNotSupported) != tt.notSupp {
				t.Errorf("errors.Is(%v, ErrSharingNotSupported) = %v, want %v", err, !tt.notSupp, tt.notSupp)
			}
			if ds, err := b.MPSDaemons(ctx); err != nil || len(ds) != 0 {
				t.Errorf("MPSDaemons after a refused start = %+v, %v", ds, err)
			}
			if err := b.StopMPS(ctx, "claim-1"); err != nil {
				t.Errorf("StopMPS: %v", err)
			}
		})
	}
}

// TestMPSProtocol: the simulated driver decides legacy MPS or v3, by the
// branch: R580 machines run legacy MPS, the R615 L4 runs v3, and an AMD
// GPU's driver version never counts.
func TestMPSProtocol(t *testing.T) {
	for _, tc := range []struct {
		profile string
		want    int
	}{{"l4-4", 0}, {"dgx-h100", 0}, {"l4-4-r615", mps.Protocol3}, {"mi300x-8", 0}, {"mixed-inference", 0}} {
		m := mustProfile(t, tc.profile)
		if got := mpsProtocol(&m.Node); got != tc.want {
			t.Errorf("%s (driver %s): protocol %d, want %d", tc.profile, m.Node.GPUs[0].DriverVersion, got, tc.want)
		}
	}
}
