package sharing

import (
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

const topo = `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","topology":{"ncclTopoFile":true}}`

func TestResolveTopology(t *testing.T) {
	mi300b := mi300
	mi300b.Name = "gpu-3"
	other := h100b
	other.Request = "other"
	tests := []struct {
		name    string
		configs []resourceapi.DeviceAllocationConfiguration
		devs    []Device
		want    []bool
		wantErr []string
	}{
		{name: "no config", devs: []Device{h100, h100b}, want: []bool{false, false}},
		{name: "two GPUs ask", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClaim, nil, topo)}, devs: []Device{h100, h100b}, want: []bool{true, true}},
		{name: "from the class", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClass, nil, topo)}, devs: []Device{h100, h100b}, want: []bool{true, true}},
		{name: "the claim's config wins over the class's", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClaim, nil, ts("Long")), cfg(fromClass, nil, topo)}, devs: []Device{h100, h100b}, want: []bool{false, false}},
		{name: "AMD", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClaim, nil, topo)}, devs: []Device{mi300, mi300b}, want: []bool{true, true}},
		{name: "one GPU: nothing", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClaim, nil, topo)}, devs: []Device{h100}, want: []bool{false}},
		{name: "one request of two", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClaim, []string{"gpu"}, topo)}, devs: []Device{h100, other},
			wantErr: []string{"config[0].opaque.parameters.topology.ncclTopoFile (from claim)", "[gpu-0] ask", "[gpu-1] do not"}},
		{name: "beside a partition", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClaim, nil, topo)}, devs: []Device{h100, mig},
			wantErr: []string{"[gpu-0-mig-1g-10gb-0] do not"}},
		{name: "capacity shares", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClaim, nil, topo)}, devs: []Device{l4Share, h100b},
			wantErr: []string{"device gpu-0 is a capacity share"}},
		{name: "two vendors", configs: []resourceapi.DeviceAllocationConfiguration{cfg(fromClaim, nil, topo)}, devs: []Device{h100, mi300},
			wantErr: []string{"two vendors"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveTopology(driver, tc.configs, tc.devs)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("got %v, want an error", got)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
