package cdi

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
)

func TestRecordAnnotationsRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		rec  checkpoint.DeviceRecord
	}{
		{name: "whole GPU", rec: checkpoint.DeviceRecord{Request: "gpus", Pool: "node-1", Device: "gpu-0", GPUUUID: "GPU-0", CDIDeviceIDs: []string{"a/b=c", "a/b=d"}}},
		{name: "partition", rec: checkpoint.DeviceRecord{Request: "mig", Pool: "node-1", Device: "gpu-1-mig", GPUUUID: "GPU-1", PartitionUUID: "MIG-1", CDIDeviceIDs: []string{"a/b=e"}}},
		{name: "MPS", rec: checkpoint.DeviceRecord{Device: "gpu-2", CDIDeviceIDs: []string{"x"},
			Sharing: &checkpoint.SharingRecord{Strategy: "MPS", MPSActiveThreadPercentage: 20, MPSPinnedMemoryLimit: 1 << 30}}},
		{name: "time-slice", rec: checkpoint.DeviceRecord{Device: "gpu-3", CDIDeviceIDs: []string{"x"}, Sharing: &checkpoint.SharingRecord{Strategy: "TimeSlicing", TimeSlice: "Medium"}}},
		{name: "share", rec: checkpoint.DeviceRecord{Device: "gpu-4", CDIDeviceIDs: []string{"x"}, ShareID: "s",
			Sharing: &checkpoint.SharingRecord{Share: &checkpoint.ShareRecord{ID: "s", MemoryBytes: 1 << 30, ComputeUnits: 4}}}},
		{name: "admin access", rec: checkpoint.DeviceRecord{Request: "gpus", Device: "gpu-5", GPUUUID: "GPU-5", CDIDeviceIDs: []string{"x"}, AdminAccess: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ann := map[string]string{annVendor: "nvidia"}
			if err := annotate(ann, tt.rec); err != nil {
				t.Fatal(err)
			}
			got, ok, err := recordOf(ann)
			if err != nil || !ok || !reflect.DeepEqual(got, tt.rec) {
				t.Errorf("recordOf(annotate(r)) = %+v, %v, %v; want %+v", got, ok, err, tt.rec)
			}
		})
	}
}

func TestRecordOfAnnotations(t *testing.T) {
	// A common device records no device.
	if rec, ok, err := recordOf(map[string]string{annVendor: "amd"}); ok || err != nil {
		t.Errorf("common device: %+v, %v, %v", rec, ok, err)
	}
	// Unreadable sharing settings are an error naming the annotation, with
	// the device it belongs to.
	rec, ok, err := recordOf(map[string]string{annDevice: "gpu-0", annSharing: "{"})
	if !ok || err == nil || !strings.Contains(err.Error(), "sharing annotation") || rec.Device != "gpu-0" {
		t.Errorf("bad sharing: %+v, %v, %v", rec, ok, err)
	}
}
