package v1alpha1

import (
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name string
		in   string
		// wantErr are substrings the error must contain; none: success.
		wantErr []string
		check   func(t *testing.T, c Config)
	}{
		{
			name: "time-slicing defaults its interval",
			in:   `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing"}}`,
			check: func(t *testing.T, c Config) {
				if got := c.GetSharing().TimeSlicing.Interval; got != DefaultTimeSlice {
					t.Errorf("interval = %q, want Default", got)
				}
				if c.DeviceType() != "gpu" {
					t.Errorf("device type = %q", c.DeviceType())
				}
			},
		},
		{
			name: "time-slicing long",
			in:   `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":"Long"}}}`,
			check: func(t *testing.T, c Config) {
				if got := c.GetSharing().TimeSlicing.Interval; got != LongTimeSlice {
					t.Errorf("interval = %q", got)
				}
			},
		},
		{
			name: "MPS with limits, number and string quantities",
			in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"PartitionConfig","sharing":{"strategy":"MPS","mps":{
				"defaultActiveThreadPercentage":50,"defaultPinnedDeviceMemoryLimit":"4Gi",
				"defaultPerDevicePinnedMemoryLimit":{"gpu-0-mig-1g-10gb-0":1073741824}}}}`,
			check: func(t *testing.T, c Config) {
				m := c.GetSharing().MPS
				if *m.DefaultActiveThreadPercentage != 50 {
					t.Errorf("threads = %d", *m.DefaultActiveThreadPercentage)
				}
				v, _ := m.DefaultPinnedDeviceMemoryLimit.Value()
				if v.Value() != 4<<30 {
					t.Errorf("pinned = %d", v.Value())
				}
				d, _ := m.DefaultPerDevicePinnedMemoryLimit["gpu-0-mig-1g-10gb-0"].Value()
				if d.Value() != 1<<30 {
					t.Errorf("per device = %d", d.Value())
				}
				if c.DeviceType() != "partition" {
					t.Errorf("device type = %q", c.DeviceType())
				}
			},
		},
		{name: "MPS without settings", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS"}}`,
			check: func(t *testing.T, c Config) {
				if c.GetSharing().MPS == nil {
					t.Error("MPS settings not defaulted")
				}
			}},
		{name: "no sharing", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig"}`,
			check: func(t *testing.T, c Config) {
				if c.GetSharing() != nil {
					t.Error("sharing appeared")
				}
			}},
		{name: "empty", in: ` `, wantErr: []string{"parameters: Required value"}},
		{name: "not JSON", in: `{`, wantErr: []string{"parameters:"}},
		{name: "too large", in: `{"x":"` + strings.Repeat("a", MaxConfigBytes) + `"}`, wantErr: []string{"more than the 10240 allowed"}},
		{name: "no apiVersion", in: `{"kind":"GpuConfig"}`, wantErr: []string{"apiVersion: Required value"}},
		{name: "other apiVersion", in: `{"apiVersion":"gpu.tessera.dev/v1","kind":"GpuConfig"}`, wantErr: []string{`apiVersion: Unsupported value: "gpu.tessera.dev/v1"`}},
		{name: "no kind", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1"}`, wantErr: []string{"kind: Required value"}},
		{name: "unknown kind", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"TpuConfig"}`, wantErr: []string{`kind: Unsupported value: "TpuConfig"`}},
		{name: "kind is case sensitive", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"gpuconfig"}`, wantErr: []string{`kind: Unsupported value: "gpuconfig"`}},
		{name: "unknown field", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"threads":5}}}`,
			wantErr: []string{"GpuConfig:", `unknown field "sharing.mps.threads"`}},
		{name: "field with other case", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","Sharing":{"strategy":"MPS"}}`,
			wantErr: []string{`unknown field "Sharing"`}},
		{name: "duplicate field", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","strategy":"TimeSlicing"}}`,
			wantErr: []string{`duplicate field "sharing.strategy"`}},
		{name: "wrong type", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":"half"}}}`,
			wantErr: []string{"GpuConfig: sharing.mps.defaultActiveThreadPercentage: wrong type: got string, want int32"}},
		{name: "no strategy", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{}}`, wantErr: []string{"sharing.strategy: Required value"}},
		{name: "unknown strategy", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"Spatial"}}`, wantErr: []string{`sharing.strategy: Unsupported value: "Spatial"`}},
		{name: "unknown interval", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":"Forever"}}}`,
			wantErr: []string{`sharing.timeSlicing.interval: Unsupported value: "Forever"`}},
		{name: "MPS settings with time-slicing", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","mps":{}}}`,
			wantErr: []string{"sharing.mps: Forbidden"}},
		{name: "time-slicing settings with MPS", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","timeSlicing":{}}}`,
			wantErr: []string{"sharing.timeSlicing: Forbidden"}},
		{name: "threads out of range", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":101}}}`,
			wantErr: []string{"sharing.mps.defaultActiveThreadPercentage: Invalid value: 101: must be between 1 and 100"}},
		{name: "threads zero", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":0}}}`,
			wantErr: []string{"sharing.mps.defaultActiveThreadPercentage: Invalid value: 0"}},
		{name: "malformed limit", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"defaultPinnedDeviceMemoryLimit":"lots"}}}`,
			wantErr: []string{`sharing.mps.defaultPinnedDeviceMemoryLimit: Invalid value: "lots": must be a quantity such as 10Gi`}},
		{name: "limit of wrong type", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"defaultPinnedDeviceMemoryLimit":{"a":1}}}}`,
			wantErr: []string{"sharing.mps.defaultPinnedDeviceMemoryLimit: Invalid value"}},
		{name: "limit too small", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"defaultPinnedDeviceMemoryLimit":"1Mi"}}}`,
			wantErr: []string{"sharing.mps.defaultPinnedDeviceMemoryLimit: Invalid value: \"1Mi\": must be at least 256Mi"}},
		{name: "per-device limit bad", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"defaultPerDevicePinnedMemoryLimit":{"gpu-1":"x"}}}}`,
			wantErr: []string{`sharing.mps.defaultPerDevicePinnedMemoryLimit[gpu-1]: Invalid value: "x"`}},
		{name: "per-device empty key", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"defaultPerDevicePinnedMemoryLimit":{"":"1Gi"}}}}`,
			wantErr: []string{`sharing.mps.defaultPerDevicePinnedMemoryLimit[]: Invalid value`}},
		{name: "partition interval", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"PartitionConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":"Short"}}}`,
			wantErr: []string{"PartitionConfig: sharing.timeSlicing.interval: Invalid value: \"Short\": a partition has no time-slice interval"}},
		{name: "partition default interval", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"PartitionConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":"Default"}}}`},
		{name: "topology file", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","topology":{"ncclTopoFile":true}}`,
			check: func(t *testing.T, c Config) {
				if tp := c.GetTopology(); tp == nil || !tp.NCCLTopoFile {
					t.Errorf("topology = %+v", tp)
				}
			}},
		{name: "topology file with time-slicing", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing"},"topology":{"ncclTopoFile":true}}`},
		{name: "topology file with MPS", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS"},"topology":{"ncclTopoFile":true}}`,
			wantErr: []string{"GpuConfig: topology.ncclTopoFile: Forbidden: may not be set with sharing strategy MPS"}},
		{name: "topology file on a partition", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"PartitionConfig","topology":{"ncclTopoFile":true}}`,
			wantErr: []string{"PartitionConfig: topology.ncclTopoFile: Forbidden: a partition has no topology file"}},
		{name: "topology off on a partition", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"PartitionConfig","topology":{"ncclTopoFile":false}}`},
		{name: "topology unknown field", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","topology":{"ncclTopoXML":true}}`,
			wantErr: []string{`unknown field "topology.ncclTopoXML"`}},
		{name: "topology wrong type", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","topology":{"ncclTopoFile":"yes"}}`,
			wantErr: []string{"GpuConfig: topology.ncclTopoFile: wrong type: got string, want bool"}},
		{name: "several errors at once", in: `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":0,"defaultPinnedDeviceMemoryLimit":"x"}}}`,
			wantErr: []string{"defaultActiveThreadPercentage", "defaultPinnedDeviceMemoryLimit"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Decode([]byte(tc.in))
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if tc.check != nil {
					tc.check(t, c)
				}
				return
			}
			if err == nil {
				t.Fatalf("Decode succeeded, want error with %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
