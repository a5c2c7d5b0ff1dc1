//go:build cgo && linux

package nvml

import (
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// SetPartitionMode switches Hopper at once, never asks NVML to change an
// A100's mode (that may reset it), refuses to turn MIG off under GPU
// instances, treats the current mode as done, and cancels a change NVML
// leaves pending.
func TestSetPartitionMode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		a100   bool
		bootOn bool
		setup  func(t *testing.T, r *rig)
		set    bool
		// wantErr "" means success; wantOn is the current and the pending
		// mode afterwards; wantCalls the nvmlDeviceSetMigMode calls.
		wantErr   string
		wantOn    bool
		wantCalls int
		// leftPending: the opposite mode stays pending (cancelling failed).
		leftPending bool
	}{
		{name: "H100 on", set: true, wantOn: true, wantCalls: 1},
		{name: "H100 off", bootOn: true, set: false, wantOn: false, wantCalls: 1},
		{name: "H100 already on", bootOn: true, set: true, wantOn: true},
		{name: "H100 already off", set: false, wantOn: false},
		{
			name: "H100 off refused with a partition", bootOn: true, set: false,
			setup:   func(t *testing.T, r *rig) { r.create(t, "2g.20gb", 2) },
			wantErr: "1 GPU instance(s) exist; destroy the GPU's partitions first", wantOn: true,
		},
		{
			name: "H100 pending change is cancelled", set: true,
			setup:   func(_ *testing.T, r *rig) { r.hw.activation = nvml.ERROR_IN_USE },
			wantErr: "the change is pending: nvmlDeviceSetMigMode activation: ", wantOn: false, wantCalls: 2,
		},
		{
			name: "H100 pending change that cannot be cancelled", set: true,
			setup: func(_ *testing.T, r *rig) {
				r.hw.activation = nvml.ERROR_IN_USE
				set := r.d.SetMigModeFunc
				r.d.SetMigModeFunc = func(mode int) (nvml.Return, nvml.Return) {
					if mode == nvml.DEVICE_MIG_DISABLE {
						r.hw.calls[callSetMigMode]++
						return nvml.SUCCESS, nvml.ERROR_UNKNOWN
					}
					return set(mode)
				}
			},
			wantErr: "cancelling the pending change failed, a GPU reset would apply it", wantOn: false, wantCalls: 2, leftPending: true,
		},
		{name: "A100 on refused", a100: true, set: true, wantErr: "needs a GPU reset on this GPU (architecture ampere), which the driver never does", wantOn: false},
		{name: "A100 off refused", a100: true, bootOn: true, set: false, wantErr: "needs a GPU reset", wantOn: true},
		{name: "A100 already on", a100: true, bootOn: true, set: true, wantOn: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r *rig
			if tc.a100 {
				r = a100Rig(t, tc.bootOn)
			} else {
				r = h100Rig(t, tc.bootOn)
			}
			if tc.setup != nil {
				tc.setup(t, r)
			}
			err := r.b.SetPartitionMode(r.ctx, r.gpu, tc.set)
			if tc.wantErr == "" && err != nil {
				t.Errorf("error %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), "nvml: set MIG mode ") || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
			if n := r.hw.calls[callSetMigMode]; n != tc.wantCalls {
				t.Errorf("%d SetMigMode calls, want %d", n, tc.wantCalls)
			}
			cur, pending, _ := r.d.GetMigMode()
			if want, wantPending := migModeValue(tc.wantOn), migModeValue(tc.wantOn != tc.leftPending); cur != want || pending != wantPending {
				t.Errorf("mode %d pending %d, want %d pending %d", cur, pending, want, wantPending)
			}
			if g := r.gpuNow(t); g.Partitioning.Enabled != tc.wantOn {
				t.Errorf("published enabled %v, want %v", g.Partitioning.Enabled, tc.wantOn)
			}
		})
	}
}

// A round trip on Hopper: on, carve, off refused, destroy, off.
func TestSetPartitionModeRoundTrip(t *testing.T) {
	r := h100Rig(t, false)
	if err := r.b.SetPartitionMode(r.ctx, r.gpu, true); err != nil {
		t.Fatal(err)
	}
	p := r.create(t, "7g.80gb", 0)
	if err := r.b.SetPartitionMode(r.ctx, r.gpu, false); err == nil {
		t.Fatal("MIG turned off under a partition")
	}
	if err := r.b.DestroyPartition(r.ctx, r.gpu, p.UUID); err != nil {
		t.Fatal(err)
	}
	if err := r.b.SetPartitionMode(r.ctx, r.gpu, false); err != nil {
		t.Fatal(err)
	}
	if g := r.gpuNow(t); g.Partitioning.Enabled || len(g.Partitions) != 0 {
		t.Errorf("partitioning %+v partitions %+v", g.Partitioning, g.Partitions)
	}
}

// Unknown GPUs and GPUs without MIG are errors, not no-ops.
func TestSetPartitionModeErrors(t *testing.T) {
	r := h100Rig(t, false)
	if err := r.b.SetPartitionMode(r.ctx, "GPU-nope", true); err == nil || !strings.Contains(err.Error(), "no such GPU on this node") {
		t.Errorf("unknown GPU: %v", err)
	}
	r.d.GetMigModeFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }
	if err := r.b.SetPartitionMode(r.ctx, r.gpu, true); err == nil || !strings.Contains(err.Error(), "does not support MIG") {
		t.Errorf("no MIG: %v", err)
	}
	if _, err := r.b.CreatePartition(r.ctx, r.gpu, "1g.10gb", inventory.Placement{Start: 0}); err == nil || !strings.Contains(err.Error(), "does not support MIG") {
		t.Errorf("carve on a GPU without MIG: %v", err)
	}
}
