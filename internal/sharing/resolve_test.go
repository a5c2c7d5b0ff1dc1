package sharing

import (
	"reflect"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tessera-gpu/tessera/api/gpu/v1alpha1"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

const driver = "gpu.tessera.dev"

func cfg(source resourceapi.AllocationConfigSource, requests []string, json string) resourceapi.DeviceAllocationConfiguration {
	return resourceapi.DeviceAllocationConfiguration{
		Source:   source,
		Requests: requests,
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(json)},
		}},
	}
}

const (
	fromClass = resourceapi.AllocationConfigSourceClass
	fromClaim = resourceapi.AllocationConfigSourceClaim
	gi        = int64(1) << 30
)

var (
	h100  = Device{Request: "gpu", Name: "gpu-0", Vendor: inventory.VendorNVIDIA, MemoryBytes: 80 * gi}
	h100b = Device{Request: "gpu", Name: "gpu-1", Vendor: inventory.VendorNVIDIA, MemoryBytes: 80 * gi}
	mig   = Device{Request: "slice", Name: "gpu-0-mig-1g-10gb-0", Partition: true, Vendor: inventory.VendorNVIDIA, MemoryBytes: 10 * gi}
	mi300 = Device{Request: "gpu", Name: "gpu-2", Vendor: inventory.VendorAMD, MemoryBytes: 192 * gi}
	// Capacity shares (share.go): an L4 has 58 SMs.
	l4Share    = Device{Request: "gpu", Name: "gpu-0", Vendor: inventory.VendorNVIDIA, MemoryBytes: 22 * gi, ComputeUnits: 58, Share: &Share{ID: "s1", MemoryBytes: 7 * gi}}
	l4Compute  = Device{Request: "gpu", Name: "gpu-0", Vendor: inventory.VendorNVIDIA, MemoryBytes: 22 * gi, ComputeUnits: 58, Share: &Share{ID: "s2", MemoryBytes: 2 * gi, ComputeUnits: 29}}
	l4OneSM    = Device{Request: "gpu", Name: "gpu-0", Vendor: inventory.VendorNVIDIA, MemoryBytes: 22 * gi, ComputeUnits: 58, Share: &Share{ID: "s3", MemoryBytes: gi, ComputeUnits: 1}}
	mi300Share = Device{Request: "gpu", Name: "gpu-2", Vendor: inventory.VendorAMD, MemoryBytes: 192 * gi, ComputeUnits: 304, Share: &Share{ID: "s4", MemoryBytes: 20 * gi, ComputeUnits: 38}}
)

func ts(interval string) string {
	return `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":"` + interval + `"}}}`
}

func mps(kind, body string) string {
	return `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"` + kind + `","sharing":{"strategy":"MPS","mps":{` + body + `}}}`
}

func TestResolve(t *testing.T) {
	tests := []struct {
		name    string
		configs []resourceapi.DeviceAllocationConfiguration
		devs    []Device
		want    []*Settings
		wantErr []string
	}{
		{name: "no config", devs: []Device{h100}, want: []*Settings{nil}},
		{name: "other driver ignored", configs: []resourceapi.DeviceAllocationConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: "other.example.com", Parameters: runtime.RawExtension{Raw: []byte(`garbage`)}}}}},
			devs: []Device{h100}, want: []*Settings{nil}},
		{name: "time-slicing from the claim", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClaim, nil, ts("Long"))},
			devs: []Device{h100}, want: []*Settings{{Strategy: v1alpha1.TimeSlicing, TimeSlice: v1alpha1.LongTimeSlice}}},
		{name: "claim wins over class, whatever the order given", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClaim, nil, ts("Short")), cfg(fromClass, nil, ts("Long"))},
			devs: []Device{h100}, want: []*Settings{{Strategy: v1alpha1.TimeSlicing, TimeSlice: v1alpha1.ShortTimeSlice}}},
		{name: "later claim config wins", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClaim, nil, ts("Short")), cfg(fromClaim, []string{"gpu"}, ts("Medium"))},
			devs: []Device{h100}, want: []*Settings{{Strategy: v1alpha1.TimeSlicing, TimeSlice: v1alpha1.MediumTimeSlice}}},
		{name: "config for another request does not apply", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClaim, []string{"other"}, ts("Short"))},
			devs: []Device{h100}, want: []*Settings{nil}},
		{name: "subrequest matched by its parent", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClaim, []string{"gpu"}, ts("Short"))},
			devs: []Device{{Request: "gpu/h100", Name: "gpu-0", Vendor: inventory.VendorNVIDIA}}, want: []*Settings{{Strategy: v1alpha1.TimeSlicing, TimeSlice: v1alpha1.ShortTimeSlice}}},
		{name: "catch-all GpuConfig skips partitions", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClass, nil, ts("Long"))},
			devs: []Device{mig}, want: []*Settings{nil}},
		{name: "partition time-slicing has no interval", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClaim, nil, `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"PartitionConfig","sharing":{"strategy":"TimeSlicing"}}`)},
			devs: []Device{mig}, want: []*Settings{{Strategy: v1alpha1.TimeSlicing}}},
		{name: "MPS on a partition", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClaim, []string{"slice"}, mps("PartitionConfig", `"defaultActiveThreadPercentage":50,"defaultPinnedDeviceMemoryLimit":"4Gi"`))},
			devs: []Device{mig}, want: []*Settings{{Strategy: v1alpha1.MPS, MPSActiveThreadPercentage: 50, MPSPinnedMemoryLimit: 4 * gi}}},
		{name: "per-device limit overrides the default", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClaim, nil, mps("GpuConfig", `"defaultPinnedDeviceMemoryLimit":"4Gi","defaultPerDevicePinnedMemoryLimit":{"gpu-1":"8Gi"}`))},
			devs: []Device{h100, h100b}, want: []*Settings{{Strategy: v1alpha1.MPS, MPSPinnedMemoryLimit: 4 * gi}, {Strategy: v1alpha1.MPS, MPSPinnedMemoryLimit: 8 * gi}}},
		{name: "AMD accepts default time-slicing", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClaim, nil, ts("Default"))},
			devs: []Device{mi300}, want: []*Settings{{Strategy: v1alpha1.TimeSlicing, TimeSlice: v1alpha1.DefaultTimeSlice}}},

		{name: "NVIDIA memory share runs under MPS with a pinned limit, no thread cap", devs: []Device{l4Share},
			want: []*Settings{{Strategy: v1alpha1.MPS, MPSPinnedMemoryLimit: 7 * gi, Share: &Share{ID: "s1", MemoryBytes: 7 * gi, Enforced: true}}}},
		{name: "NVIDIA compute share gets its fraction of threads", devs: []Device{l4Compute},
			want: []*Settings{{Strategy: v1alpha1.MPS, MPSPinnedMemoryLimit: 2 * gi, MPSActiveThreadPercentage: 50, Share: &Share{ID: "s2", MemoryBytes: 2 * gi, ComputeUnits: 29, Enforced: true}}}},
		{name: "thread percentage rounds up", devs: []Device{l4OneSM},
			want: []*Settings{{Strategy: v1alpha1.MPS, MPSPinnedMemoryLimit: gi, MPSActiveThreadPercentage: 2, Share: &Share{ID: "s3", MemoryBytes: gi, ComputeUnits: 1, Enforced: true}}}},
		{name: "AMD share is accounting only", devs: []Device{mi300Share},
			want: []*Settings{{Share: &Share{ID: "s4", MemoryBytes: 20 * gi, ComputeUnits: 38}}}},
		{name: "AMD shares of two GPUs in one claim", devs: []Device{mi300Share, {Request: "gpu", Name: "gpu-3", Vendor: inventory.VendorAMD, MemoryBytes: 192 * gi, ComputeUnits: 304, Share: &Share{ID: "s5", MemoryBytes: 20 * gi}}},
			want: []*Settings{{Share: &Share{ID: "s4", MemoryBytes: 20 * gi, ComputeUnits: 38}}, {Share: &Share{ID: "s5", MemoryBytes: 20 * gi}}}},
		{name: "config on a share refused", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClass, nil, ts("Long"))},
			devs: []Device{l4Share}, wantErr: []string{`request "gpu", device gpu-0: status.allocation.devices.config[0].opaque.parameters.sharing (from class): the device is a capacity share (7Gi) whose limits come from the capacity it consumed`}},
		{name: "NVIDIA share with another device refused", devs: []Device{l4Share, h100b},
			wantErr: []string{"device gpu-0 is a share of an NVIDIA GPU, run by that GPU's MPS daemon, and a container connects to one MPS daemon: a claim holding such a share can hold no other device (it has 2)"}},
		{name: "bad config fails with its index and source", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClass, nil, ts("Short")), cfg(fromClaim, nil, `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"x":1}}}`)},
			devs: []Device{h100}, wantErr: []string{`status.allocation.devices.config[1].opaque.parameters (from claim): GpuConfig: unknown field "sharing.mps.x"`}},
		{name: "MPS on AMD", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClaim, nil, mps("GpuConfig", ""))},
			devs: []Device{mi300}, wantErr: []string{`request "gpu", device gpu-2: status.allocation.devices.config[0].opaque.parameters.sharing.strategy (from claim): MPS is not supported on AMD GPUs`}},
		{name: "interval on AMD", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClaim, nil, ts("Long"))},
			devs: []Device{mi300}, wantErr: []string{`device gpu-2: status.allocation.devices.config[0].opaque.parameters.sharing.timeSlicing.interval (from claim): Long cannot be set on AMD GPUs`}},
		{name: "pinned limit above device memory", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClaim, nil, mps("PartitionConfig", `"defaultPinnedDeviceMemoryLimit":"20Gi"`))},
			devs: []Device{mig}, wantErr: []string{`device gpu-0-mig-1g-10gb-0: status.allocation.devices.config[0].opaque.parameters.sharing.mps.defaultPinnedDeviceMemoryLimit (from claim): 20Gi is more than the device's memory (10Gi)`}},
		{name: "per-device key not allocated", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClaim, nil, mps("GpuConfig", `"defaultPerDevicePinnedMemoryLimit":{"gpu-7":"8Gi"}`))},
			devs: []Device{h100}, wantErr: []string{`opaque.parameters.sharing.mps.defaultPerDevicePinnedMemoryLimit[gpu-7] (from claim): no device of that name`}},
		{name: "kind for the other device type named by request", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClaim, []string{"slice"}, ts("Long"))},
			devs: []Device{mig}, wantErr: []string{`request "slice", device gpu-0-mig-1g-10gb-0: status.allocation.devices.config[0].opaque.parameters.kind (from claim): kind GpuConfig is for devices of type "gpu", but this device is a partition`}},
		{name: "MPS on some devices only", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClaim, []string{"slice"}, mps("PartitionConfig", ""))},
			devs: []Device{h100, mig}, wantErr: []string{"devices [gpu-0-mig-1g-10gb-0] are configured for MPS and [gpu-0] are not"}},
		{name: "MPS thread percentages differ", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClaim, []string{"gpu"}, mps("GpuConfig", `"defaultActiveThreadPercentage":20`)), cfg(fromClaim, []string{"slice"}, mps("PartitionConfig", `"defaultActiveThreadPercentage":40`))},
			devs: []Device{h100, mig}, wantErr: []string{"defaultActiveThreadPercentage differs"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(driver, tc.configs, tc.devs)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Resolve succeeded: %+v", got)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q\ndoes not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d settings, want %d", len(got), len(tc.want))
			}
			for i := range got {
				if !reflect.DeepEqual(got[i], tc.want[i]) {
					t.Errorf("device %d: got %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}
