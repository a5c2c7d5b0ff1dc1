package checkpoint

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/api/gpu/v1alpha1"
	"github.com/tessera-gpu/tessera/internal/golden"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/sharing"
)

// goldenSeq is the sequence testdata/v2.json was written with.
const goldenSeq = 3

// goldenState holds every kind of entry the checkpoint records: whole GPUs
// (one with a time-slice), a carved MIG partition under MPS with its
// placement, a static partition, a carve saved before it was made, capacity
// shares (enforced NVIDIA, accounting-only AMD, a whole multi-allocatable
// device), a teardown in progress, and the node-wide fields.
func goldenState() *Checkpoint {
	at := time.Date(2026, 12, 1, 9, 15, 30, 250000000, time.UTC)
	mi := int64(1 << 20)
	cp := New()
	cp.BootID = "8d3c1f0e-6b2a-4c59-9e7d-1a2b3c4d5e6f"
	cp.PartitionModeOn = []string{"GPU-2", "GPU-4"}
	cp.Claims["uid-whole"] = &Claim{
		UID: "uid-whole", Namespace: "ns-a", Name: "train", State: PrepareCompleted, Updated: at,
		Devices: []Device{
			{Request: "gpus", Pool: "node-1", Device: "gpu-0", GPUUUID: "GPU-0",
				CDIDeviceIDs: []string{"k8s.gpu.tessera.dev/claim=uid-whole-0-gpu-0", "k8s.gpu.tessera.dev/claim=uid-whole-common-nvidia"}},
			{Request: "gpus", Pool: "node-1", Device: "gpu-1", GPUUUID: "GPU-1",
				CDIDeviceIDs: []string{"k8s.gpu.tessera.dev/claim=uid-whole-1-gpu-1", "k8s.gpu.tessera.dev/claim=uid-whole-common-nvidia"},
				Sharing:      &sharing.Settings{Strategy: v1alpha1.TimeSlicing, TimeSlice: v1alpha1.LongTimeSlice}},
		},
	}
	cp.Claims["uid-mig"] = &Claim{
		UID: "uid-mig", Namespace: "ns-a", Name: "infer", State: PrepareCompleted, Updated: at.Add(time.Second),
		Devices: []Device{
			{Request: "mig", Pool: "node-1", Device: "gpu-2-mig-3g-40gb-4", GPUUUID: "GPU-2", PartitionUUID: "MIG-2-4", CreatedPartition: true,
				Profile: "3g.40gb", Placement: &inventory.Placement{Start: 4, Size: 4},
				CDIDeviceIDs: []string{"k8s.gpu.tessera.dev/claim=uid-mig-0-gpu-2-mig-3g-40gb-4", "k8s.gpu.tessera.dev/claim=uid-mig-common-nvidia", "k8s.gpu.tessera.dev/claim=uid-mig-mps"},
				Sharing:      &sharing.Settings{Strategy: v1alpha1.MPS, MPSActiveThreadPercentage: 50, MPSPinnedMemoryLimit: 4096 * mi}},
			{Request: "static", Pool: "node-1", Device: "gpu-3-mig-1g-10gb-0", GPUUUID: "GPU-3", PartitionUUID: "MIG-3-0",
				CDIDeviceIDs: []string{"k8s.gpu.tessera.dev/claim=uid-mig-1-gpu-3-mig-1g-10gb-0", "k8s.gpu.tessera.dev/claim=uid-mig-common-nvidia"}},
		},
	}
	cp.Claims["uid-carving"] = &Claim{
		UID: "uid-carving", Namespace: "ns-b", Name: "carve", State: PrepareStarted, Updated: at.Add(2 * time.Second),
		Devices: []Device{
			{Request: "mig", Pool: "node-1", Device: "gpu-4-mig-1g-10gb-6", GPUUUID: "GPU-4", Profile: "1g.10gb", Placement: &inventory.Placement{Start: 6, Size: 1}},
		},
	}
	cp.Claims["uid-shares"] = &Claim{
		UID: "uid-shares", Namespace: "ns-b", Name: "shares", State: PrepareCompleted, Updated: at.Add(3 * time.Second),
		Devices: []Device{
			{Request: "nv", Pool: "node-1", Device: "gpu-5", GPUUUID: "GPU-5", ShareID: "0f6c1e2d-share-nv",
				CDIDeviceIDs: []string{"k8s.gpu.tessera.dev/claim=uid-shares-0-gpu-5", "k8s.gpu.tessera.dev/claim=uid-shares-common-nvidia"},
				Sharing: &sharing.Settings{Strategy: v1alpha1.MPS, MPSActiveThreadPercentage: 50, MPSPinnedMemoryLimit: 8192 * mi,
					Share: &sharing.Share{ID: "0f6c1e2d-share-nv", MemoryBytes: 8192 * mi, ComputeUnits: 29, Enforced: true}}},
			{Request: "amd", Pool: "node-1", Device: "gpu-6", GPUUUID: "amd-6", ShareID: "0f6c1e2d-share-amd",
				CDIDeviceIDs: []string{"k8s.gpu.tessera.dev/claim=uid-shares-1-gpu-6", "k8s.gpu.tessera.dev/claim=uid-shares-common-amd"},
				Sharing:      &sharing.Settings{Share: &sharing.Share{ID: "0f6c1e2d-share-amd", MemoryBytes: 16384 * mi}}},
			{Request: "whole", Pool: "node-1", Device: "gpu-7", GPUUUID: "GPU-7", ShareID: "0f6c1e2d-share-whole",
				CDIDeviceIDs: []string{"k8s.gpu.tessera.dev/claim=uid-shares-2-gpu-7", "k8s.gpu.tessera.dev/claim=uid-shares-common-nvidia"}},
		},
	}
	cp.Claims["uid-gone"] = &Claim{
		UID: "uid-gone", Namespace: "ns-b", Name: "old", State: UnprepareStarted, Updated: at.Add(4 * time.Second), Unconfirmed: true,
		Devices: []Device{
			{Request: "gpus", Pool: "node-1", Device: "gpu-8", GPUUUID: "GPU-8",
				CDIDeviceIDs: []string{"k8s.gpu.tessera.dev/claim=uid-gone-0-gpu-8", "k8s.gpu.tessera.dev/claim=uid-gone-common-nvidia"}},
		},
	}
	return cp
}

// v1State is what testdata/v1.json holds, read by this version: the first
// format's fields (no sharing, shares or unconfirmed claims then).
func v1State() *Checkpoint {
	at := time.Date(2026, 11, 29, 18, 0, 5, 0, time.UTC)
	cp := New()
	cp.BootID = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	cp.PartitionModeOn = []string{"GPU-7"}
	cp.Claims["uid-a"] = &Claim{
		UID: "uid-a", Namespace: "ns", Name: "mig", State: PrepareCompleted, Updated: at,
		Devices: []Device{
			{Request: "gpu", Pool: "n", Device: "gpu-7-mig-3g-40gb-4", GPUUUID: "GPU-7", PartitionUUID: "MIG-1", CreatedPartition: true,
				Profile: "3g.40gb", Placement: &inventory.Placement{Start: 4, Size: 4},
				CDIDeviceIDs: []string{"k8s.gpu.tessera.dev/claim=uid-a-0-gpu-7-mig-3g-40gb-4", "k8s.gpu.tessera.dev/claim=uid-a-common-nvidia"}},
			{Request: "gpu", Pool: "n", Device: "gpu-0", GPUUUID: "GPU-0",
				CDIDeviceIDs: []string{"k8s.gpu.tessera.dev/claim=uid-a-1-gpu-0", "k8s.gpu.tessera.dev/claim=uid-a-common-nvidia"}},
		},
	}
	cp.Claims["uid-b"] = &Claim{
		UID: "uid-b", Namespace: "ns", Name: "carve", State: PrepareStarted, Updated: at.Add(time.Second),
		Devices: []Device{{Request: "gpu", Pool: "n", Device: "gpu-7-mig-1g-10gb-0", GPUUUID: "GPU-7", Profile: "1g.10gb", Placement: &inventory.Placement{Start: 0, Size: 1}}},
	}
	cp.Claims["uid-c"] = &Claim{UID: "uid-c", Namespace: "ns", Name: "old", State: UnprepareStarted, Updated: at.Add(2 * time.Second)}
	return cp
}

// The current format, byte for byte: what an agent of this version writes
// is what testdata/v2.json holds, and that file reads back as the state.
func TestGoldenEncode(t *testing.T) {
	path := filepath.Join("testdata", "v2.json")
	got, err := encode(goldenState(), goldenSeq)
	if err != nil {
		t.Fatal(err)
	}
	golden.Compare(t, path, got)
}

// Files of this and every earlier version keep loading: an agent upgrade
// keeps the claims it prepared. Saving what was loaded writes the current
// format.
func TestGoldenLoad(t *testing.T) {
	tests := []struct {
		file    string
		want    *Checkpoint
		wantSeq uint64
	}{
		{file: "v2.json", want: goldenState(), wantSeq: goldenSeq},
		// Indented, without a sequence (one file), placements with Go's
		// field names.
		{file: "v1.json", want: v1State(), wantSeq: 0},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			got, seq, err := decode(data)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) || seq != tt.wantSeq {
				t.Errorf("decode: sequence %d, want %d\n got %+v\nwant %+v", seq, tt.wantSeq, got, tt.want)
			}

			// Through the store, as the agent reads it at start.
			path := filepath.Join(t.TempDir(), "checkpoint.json")
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			s := NewStore(path)
			loaded, err := s.Load()
			if err != nil || !reflect.DeepEqual(loaded, tt.want) {
				t.Fatalf("Load = %+v, %v; want %+v", loaded, err, tt.want)
			}
			if err := s.Save(loaded); err != nil {
				t.Fatal(err)
			}
			again, err := Read(path)
			if err != nil || !reflect.DeepEqual(again, tt.want) {
				t.Errorf("after a save: %+v, %v; want %+v", again, err, tt.want)
			}
		})
	}
}

// vfioState is a GPU passed through to a virtual machine, with its audio
// function, and one whose passthrough was saved before it was done.
func vfioState() *Checkpoint {
	at := time.Date(2026, 12, 7, 11, 0, 0, 0, time.UTC)
	cp := New()
	cp.BootID = "3f0c2b1a-7d6e-4f58-8a9b-0c1d2e3f4a5b"
	cp.Claims["uid-vm"] = &Claim{
		UID: "uid-vm", Namespace: "vms", Name: "guest", State: PrepareCompleted, Updated: at,
		Devices: []Device{{Request: "gpu", Pool: "node-1", Device: "gpu-3", GPUUUID: "GPU-3",
			CDIDeviceIDs: []string{"k8s.gpu.tessera.dev/claim=uid-vm-0-gpu-3", "k8s.gpu.tessera.dev/claim=uid-vm-vfio"},
			VFIO:         &VFIO{Group: 40, Bound: true, Functions: []VFIOFunction{{Address: "0000:41:00.0", Driver: "nvidia"}, {Address: "0000:41:00.1", Driver: "snd_hda_intel"}}}}},
	}
	cp.Claims["uid-vm-2"] = &Claim{
		UID: "uid-vm-2", Namespace: "vms", Name: "starting", State: PrepareStarted, Updated: at.Add(time.Second),
		Devices: []Device{{Request: "gpu", Pool: "node-1", Device: "gpu-5", GPUUUID: "amd-5",
			VFIO: &VFIO{Group: 57, Functions: []VFIOFunction{{Address: "0000:5a:00.0", Driver: "amdgpu"}}}}},
	}
	return cp
}

// The passthrough record, byte for byte: an additive field of version 2
// (record.go), pinned apart from v2.json, which never changes.
func TestGoldenVFIO(t *testing.T) {
	path := filepath.Join("testdata", "v2-vfio.json")
	got, err := encode(vfioState(), 1)
	if err != nil {
		t.Fatal(err)
	}
	golden.Compare(t, path, got)
	back, _, err := decode(got)
	if err != nil || !reflect.DeepEqual(back, vfioState()) {
		t.Errorf("decode = %+v, %v; want %+v", back, err, vfioState())
	}
	clone := vfioState().Clone()
	clone.Claims["uid-vm"].Devices[0].VFIO.Functions[0].Driver = "changed"
	if vfioState().Claims["uid-vm"].Devices[0].VFIO.Functions[0].Driver != "nvidia" {
		t.Error("Clone shares the VFIO record")
	}
}
