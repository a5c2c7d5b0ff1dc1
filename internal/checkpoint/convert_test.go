package checkpoint

import (
	"reflect"
	"testing"

	"github.com/tessera-gpu/tessera/api/gpu/v1alpha1"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/sharing"
)

func TestDeviceRecordRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		dev  Device
	}{
		{name: "empty", dev: Device{}},
		{name: "whole GPU", dev: Device{Request: "gpus", Pool: "node-1", Device: "gpu-0", GPUUUID: "GPU-0", CDIDeviceIDs: []string{"a", "b"}}},
		{name: "time-slice", dev: Device{Device: "gpu-1", Sharing: &sharing.Settings{Strategy: v1alpha1.TimeSlicing, TimeSlice: v1alpha1.ShortTimeSlice}}},
		{name: "carve intent", dev: Device{Device: "gpu-2-mig", Profile: "1g.10gb", Placement: &inventory.Placement{Start: 6, Size: 1}}},
		{name: "carved, MPS", dev: Device{Device: "gpu-2-mig", GPUUUID: "GPU-2", PartitionUUID: "MIG-2", CreatedPartition: true, Profile: "3g.40gb",
			Placement: &inventory.Placement{Start: 4, Size: 4}, Sharing: &sharing.Settings{Strategy: v1alpha1.MPS, MPSActiveThreadPercentage: 30, MPSPinnedMemoryLimit: 1 << 30}}},
		{name: "enforced share", dev: Device{Device: "gpu-3", ShareID: "s", Sharing: &sharing.Settings{Strategy: v1alpha1.MPS, MPSPinnedMemoryLimit: 8 << 30,
			Share: &sharing.Share{ID: "s", MemoryBytes: 8 << 30, ComputeUnits: 29, Enforced: true}}}},
		{name: "accounting share", dev: Device{Device: "gpu-4", ShareID: "t", Sharing: &sharing.Settings{Share: &sharing.Share{ID: "t", MemoryBytes: 1 << 30}}}},
		{name: "whole multi-allocatable", dev: Device{Device: "gpu-5", ShareID: "u"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := RecordOf(tt.dev)
			if got := DeviceOf(rec); !reflect.DeepEqual(got, tt.dev) {
				t.Errorf("DeviceOf(RecordOf(d)) = %+v, want %+v", got, tt.dev)
			}
			if again := RecordOf(DeviceOf(rec)); !reflect.DeepEqual(again, rec) {
				t.Errorf("record round trip = %+v, want %+v", again, rec)
			}
			// The record holds its own placement and settings: changing
			// them leaves the device alone.
			if rec.Placement != nil {
				rec.Placement.Start++
				if rec.Placement.Start == tt.dev.Placement.Start {
					t.Error("placement shared with the device")
				}
			}
			if rec.Sharing != nil {
				rec.Sharing.MPSActiveThreadPercentage++
				if rec.Sharing.MPSActiveThreadPercentage == tt.dev.Sharing.MPSActiveThreadPercentage {
					t.Error("sharing settings shared with the device")
				}
				if rec.Sharing.Share != nil {
					rec.Sharing.Share.MemoryBytes++
					if rec.Sharing.Share.MemoryBytes == tt.dev.Sharing.Share.MemoryBytes {
						t.Error("share shared with the device")
					}
				}
			}
		})
	}
}

func TestFileRecordRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		cp   *Checkpoint
	}{
		{name: "empty", cp: New()},
		{name: "sample", cp: sample()},
		{name: "golden", cp: goldenState()},
		{name: "v1", cp: v1State()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fileOf(tt.cp)
			if got := f.checkpoint(); !reflect.DeepEqual(got, tt.cp) {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, tt.cp)
			}
		})
	}
	// No claims map is written as an empty one.
	if f := fileOf(&Checkpoint{Version: CurrentVersion}); f.Claims == nil {
		t.Error("nil claims recorded as nil")
	}
}

// Every field of a type the checkpoint converts has its field in the
// record: a field added to one side only would be dropped from the file
// without a word.
func TestRecordsCoverEveryField(t *testing.T) {
	for _, pair := range [][2]any{
		{Checkpoint{}, fileRecord{}},
		{Claim{}, claimRecord{}},
		{Device{}, DeviceRecord{}},
		{inventory.Placement{}, PlacementRecord{}},
		{sharing.Settings{}, SharingRecord{}},
		{sharing.Share{}, ShareRecord{}},
	} {
		a, b := reflect.TypeOf(pair[0]), reflect.TypeOf(pair[1])
		if a.NumField() != b.NumField() {
			t.Errorf("%v has %d fields, its record %v %d", a, a.NumField(), b, b.NumField())
			continue
		}
		for i := range a.NumField() {
			if fa, fb := a.Field(i).Name, b.Field(i).Name; fa != fb {
				t.Errorf("%v field %d is %s, its record's %s", a, i, fa, fb)
			}
		}
	}
}
