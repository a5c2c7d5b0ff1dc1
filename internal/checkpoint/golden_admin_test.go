package checkpoint

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/internal/golden"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// adminState is a monitor's claim beside the claims it watches: a whole
// GPU another claim holds, and a carved MIG slice of a third, both
// allocated for admin access.
func adminState() *Checkpoint {
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	cp := New()
	cp.BootID = "3f0c2b1a-7d6e-4f58-8a9b-0c1d2e3f4a5b"
	cp.Claims["uid-train"] = &Claim{
		UID: "uid-train", Namespace: "team-a", Name: "train", State: PrepareCompleted, Updated: at,
		Devices: []Device{{Request: "gpu", Pool: "node-1", Device: "gpu-0", GPUUUID: "GPU-0",
			CDIDeviceIDs: []string{"k8s.gpu.tessera.dev/claim=uid-train-0-gpu-0"}}},
	}
	cp.Claims["uid-slice"] = &Claim{
		UID: "uid-slice", Namespace: "team-b", Name: "slice", State: PrepareCompleted, Updated: at,
		Devices: []Device{{Request: "mig", Pool: "node-1", Device: "gpu-1-mig-1g-10gb-6", GPUUUID: "GPU-1",
			PartitionUUID: "MIG-1", CreatedPartition: true, Profile: "1g.10gb", Placement: &inventory.Placement{Start: 6, Size: 1},
			CDIDeviceIDs: []string{"k8s.gpu.tessera.dev/claim=uid-slice-0-gpu-1-mig-1g-10gb-6"}}},
	}
	cp.Claims["uid-monitor"] = &Claim{
		UID: "uid-monitor", Namespace: "monitoring", Name: "dcgm", State: PrepareCompleted, Updated: at.Add(time.Second),
		Devices: []Device{
			{Request: "gpus", Pool: "node-1", Device: "gpu-0", GPUUUID: "GPU-0", AdminAccess: true,
				CDIDeviceIDs: []string{"k8s.gpu.tessera.dev/claim=uid-monitor-0-gpu-0"}},
			{Request: "gpus", Pool: "node-1", Device: "gpu-1-mig-1g-10gb-6", GPUUUID: "GPU-1", PartitionUUID: "MIG-1", AdminAccess: true,
				CDIDeviceIDs: []string{"k8s.gpu.tessera.dev/claim=uid-monitor-1-gpu-1-mig-1g-10gb-6"}},
		},
	}
	return cp
}

// The admin-access mark, byte for byte: an additive field of version 2
// (record.go), pinned apart from v2.json, which never changes.
func TestGoldenAdminAccess(t *testing.T) {
	path := filepath.Join("testdata", "v2-admin.json")
	got, err := encode(adminState(), 1)
	if err != nil {
		t.Fatal(err)
	}
	golden.Compare(t, path, got)
	back, _, err := decode(got)
	if err != nil || !reflect.DeepEqual(back, adminState()) {
		t.Errorf("decode = %+v, %v; want %+v", back, err, adminState())
	}
}
