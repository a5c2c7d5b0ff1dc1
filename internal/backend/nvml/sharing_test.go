//go:build cgo && linux

package nvml

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/mps"
	"github.com/tessera-gpu/tessera/internal/sim/standin"
	"github.com/tessera-gpu/tessera/internal/sim/standin/standintest"
)

// TestMain lets the test binary be the MPS control stand-in (standintest).
func TestMain(m *testing.M) { standintest.Main(m) }

// fakeSMI writes an nvidia-smi that appends its arguments to a file, prints
// output and exits with status; it returns the script and the file.
func fakeSMI(t *testing.T, output string, status int) (script, argsFile string) {
	t.Helper()
	dir := t.TempDir()
	script, argsFile = filepath.Join(dir, "nvidia-smi"), filepath.Join(dir, "args")
	body := "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '" + argsFile + "'\n"
	if output != "" {
		body += "echo '" + output + "'\n"
	}
	body += "exit " + strconv.Itoa(status) + "\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, argsFile
}

// smiRuns is what the fake nvidia-smi was run with, one line per run.
func smiRuns(t *testing.T, argsFile string) []string {
	t.Helper()
	data, err := os.ReadFile(argsFile)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// withSharing points b's sharing at smi and at the stand-in control
// program with a fresh MPS root, which it returns; daemons left are
// stopped at the end.
func withSharing(t *testing.T, b *Backend, smi string) string {
	t.Helper()
	root := t.TempDir()
	var err error
	if b.mps, err = mps.New(mps.Config{Root: root, Control: standintest.Control(t), Logger: b.logger}); err != nil {
		t.Fatal(err)
	}
	b.smi = smi
	t.Cleanup(func() {
		ds, _ := b.MPSDaemons(context.Background())
		for _, d := range ds {
			if err := b.StopMPS(context.Background(), d.ID); err != nil {
				t.Error(err)
			}
		}
	})
	return root
}

func TestSetTimeSlice(t *testing.T) {
	r := h100Rig(t, true)
	mig := r.create(t, "1g.10gb", 0).UUID
	gpu1 := h100UUID(t, r, 1)
	tests := []struct {
		name     string
		gpu      string
		ts       backend.TimeSlice
		output   string
		status   int
		wantArgs string // the nvidia-smi run; "" when none may run
		wantErr  []string
	}{
		{name: "long", gpu: r.gpu, ts: backend.TimeSliceLong, wantArgs: "compute-policy -i " + r.gpu + " --set-timeslice=3"},
		{name: "short on another GPU", gpu: gpu1, ts: backend.TimeSliceShort, wantArgs: "compute-policy -i " + gpu1 + " --set-timeslice=1"},
		{name: "default", gpu: r.gpu, ts: backend.TimeSliceDefault, wantArgs: "compute-policy -i " + r.gpu + " --set-timeslice=0"},
		{name: "nvidia-smi fails", gpu: r.gpu, ts: backend.TimeSliceMedium, output: "Failed to set compute policy: Insufficient Permissions", status: 4,
			wantArgs: "compute-policy -i " + r.gpu + " --set-timeslice=2", wantErr: []string{r.gpu, "Insufficient Permissions", "exit status 4"}},
		{name: "MIG device", gpu: mig, ts: backend.TimeSliceLong, wantErr: []string{mig, "whole GPUs"}},
		{name: "unknown GPU", gpu: "GPU-nope", ts: backend.TimeSliceLong, wantErr: []string{"GPU-nope", errUnknownGPU.Error()}},
		{name: "out of range", gpu: r.gpu, ts: backend.TimeSlice(9), wantErr: []string{r.gpu, "not one of"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			smi, args := fakeSMI(t, tt.output, tt.status)
			withSharing(t, r.b, smi)
			err := r.b.SetTimeSlice(ctx, tt.gpu, tt.ts)
			for _, w := range tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("SetTimeSlice: %v, want an error with %q", err, w)
				}
			}
			if len(tt.wantErr) == 0 && err != nil {
				t.Fatal(err)
			}
			var want []string
			if tt.wantArgs != "" {
				want = []string{tt.wantArgs}
			}
			if got := smiRuns(t, args); !slices.Equal(got, want) {
				t.Errorf("nvidia-smi runs %q, want %q", got, want)
			}
		})
	}
}

func TestSetTimeSliceWithoutNvidiaSMI(t *testing.T) {
	r := h100Rig(t, false)
	missing := filepath.Join(t.TempDir(), "nvidia-smi")
	withSharing(t, r.b, missing)
	err := r.b.SetTimeSlice(r.ctx, r.gpu, backend.TimeSliceLong)
	if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), r.gpu) {
		t.Fatalf("SetTimeSlice with no nvidia-smi: %v", err)
	}
}

func TestMPS(t *testing.T) {
	r := h100Rig(t, true)
	root := withSharing(t, r.b, "nvidia-smi")
	mig := r.create(t, "3g.40gb", 4).UUID
	gpu1 := h100UUID(t, r, 1)
	spec := mps.DaemonSpec{
		ID: "claim-1", Devices: []string{mig, gpu1}, ActiveThreadPercentage: 60,
		PinnedMemoryLimits: map[string]int64{gpu1: 10 << 30, mig: 3<<30 + 1},
	}
	d, err := r.b.StartMPS(r.ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if d.Adopted || d.PipeDir != filepath.Join(root, "claim-1", "pipe") || d.LogDir != filepath.Join(root, "claim-1", "log") {
		t.Errorf("StartMPS = %+v", d)
	}
	st, err := standin.ReadStatus(d.PipeDir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"get_default_active_thread_percentage",
		"set_default_active_thread_percentage 60",
		"set_default_device_pinned_mem_limit " + mig + " 3072M",
		"set_default_device_pinned_mem_limit " + gpu1 + " 10240M",
	}
	if !slices.Equal(st.Commands, want) || !slices.Equal(st.Devices, spec.Devices) {
		t.Errorf("daemon got devices %v, commands %q; want %v, %q", st.Devices, st.Commands, spec.Devices, want)
	}
	if ds, err := r.b.MPSDaemons(r.ctx); err != nil || !slices.Equal(ds, []mps.DaemonState{{ID: "claim-1", Running: true}}) {
		t.Errorf("MPSDaemons = %+v, %v", ds, err)
	}
	if err := r.b.StopMPS(r.ctx, "claim-1"); err != nil {
		t.Fatal(err)
	}
	if ds, err := r.b.MPSDaemons(r.ctx); err != nil || len(ds) != 0 {
		t.Errorf("MPSDaemons after StopMPS = %+v, %v", ds, err)
	}

	// A device this node does not have: nothing starts.
	_, err = r.b.StartMPS(r.ctx, mps.DaemonSpec{ID: "claim-2", Devices: []string{gpu1, "MIG-gone"}})
	if err == nil || !strings.Contains(err.Error(), "MIG-gone") || !strings.Contains(err.Error(), "claim-2") {
		t.Errorf("StartMPS with an unknown device: %v", err)
	}
	if ds, _ := r.b.MPSDaemons(r.ctx); len(ds) != 0 {
		t.Errorf("a refused StartMPS left %+v", ds)
	}
}

func TestSharingDefaults(t *testing.T) {
	s, root := newMachine(t, gpus.Multiple(1, gpus.A100_SXM4_40GB), dgxA100Slots()[:1])
	b := newBackend(t, s, root)
	if b.smi != "nvidia-smi" || b.mps.Root() != "/var/run/tessera/mps" {
		t.Errorf("defaults: nvidia-smi %q, MPS root %q", b.smi, b.mps.Root())
	}
	custom, err := New(Options{Lib: s, SysfsRoot: root, NvidiaSMI: "/opt/bin/nvidia-smi", MPSRoot: "/run/mps", MPSControl: []string{"/opt/bin/nvidia-cuda-mps-control"}})
	if err != nil {
		t.Fatal(err)
	}
	defer custom.Close()
	if custom.smi != "/opt/bin/nvidia-smi" || custom.mps.Root() != "/run/mps" {
		t.Errorf("options: nvidia-smi %q, MPS root %q", custom.smi, custom.mps.Root())
	}
}

// h100UUID is the UUID of the rig machine's GPU i.
func h100UUID(t *testing.T, r *rig, i int) string {
	t.Helper()
	n, err := r.b.Discover(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return n.GPUs[i].UUID
}
