package checkpoint

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/api/gpu/v1alpha1"
	"github.com/tessera-gpu/tessera/internal/sharing"
)

var t0 = time.Date(2026, 3, 1, 12, 30, 45, 123456789, time.UTC)

func sample() *Checkpoint {
	cp := New()
	cp.BootID = "5c1e0b8a-0f7e-4a57-9b1c-2d3e4f5a6b7c"
	cp.Claims["uid-a"] = &Claim{
		UID: "uid-a", Namespace: "ns-a", Name: "train", State: PrepareCompleted, Updated: t0,
		Devices: []Device{
			{Request: "gpus", Pool: "node-1", Device: "gpu-0", GPUUUID: "GPU-0", CDIDeviceIDs: []string{"k8s.gpu.tessera.dev/claim=uid-a-0-gpu-0", "k8s.gpu.tessera.dev/claim=uid-a-common-nvidia"}},
			{Request: "mig", Pool: "node-1", Device: "gpu-1-mig", GPUUUID: "GPU-1", PartitionUUID: "MIG-1", CreatedPartition: true,
				Sharing: &sharing.Settings{Strategy: v1alpha1.MPS, MPSActiveThreadPercentage: 50}},
		},
	}
	cp.Claims["uid-b"] = &Claim{UID: "uid-b", Namespace: "ns-b", Name: "infer", State: PrepareStarted, Updated: t0.Add(time.Second)}
	cp.Claims["uid-c"] = &Claim{UID: "uid-c", Namespace: "ns-b", Name: "old", State: UnprepareStarted, Updated: t0.Add(2 * time.Second)}
	return cp
}

func TestClone(t *testing.T) {
	orig := sample()
	c := orig.Clone()
	if !reflect.DeepEqual(orig, c) {
		t.Fatal("clone differs from original")
	}
	// Every level must be independent.
	c.BootID = "x"
	c.Claims["uid-a"].State = UnprepareStarted
	c.Claims["uid-a"].Devices[0].Device = "changed"
	c.Claims["uid-a"].Devices[0].CDIDeviceIDs[0] = "changed"
	c.Claims["uid-a"].Devices[1].Sharing.MPSActiveThreadPercentage = 10
	delete(c.Claims, "uid-b")
	if !reflect.DeepEqual(orig, sample()) {
		t.Error("changing the clone changed the original")
	}
	if (*Checkpoint)(nil).Clone() != nil {
		t.Error("nil clone not nil")
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Checkpoint)
		wantErr string
	}{
		{name: "valid", mutate: func(*Checkpoint) {}},
		{name: "nil entry", mutate: func(cp *Checkpoint) { cp.Claims["uid-x"] = nil }, wantErr: "no entry"},
		{name: "wrong key", mutate: func(cp *Checkpoint) { cp.Claims["uid-x"] = cp.Claims["uid-a"] }, wantErr: "filed under"},
		{name: "bad state", mutate: func(cp *Checkpoint) { cp.Claims["uid-a"].State = "Prepared" }, wantErr: "unknown state"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp := sample()
			tt.mutate(cp)
			err := cp.validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("validate() = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
