package v1alpha1

import (
	"encoding/json"
	"testing"
)

// FuzzDecode: Decode never panics, and whatever it accepts is stable: encoded
// again and decoded, it gives the same object (defaults applied once).
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":"Long"}}}`,
		`{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"PartitionConfig","sharing":{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":50,"defaultPinnedDeviceMemoryLimit":"4Gi","defaultPerDevicePinnedMemoryLimit":{"gpu-0":1073741824}}}}`,
		`{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","strategy":"MPS"}}`,
		`{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":null}`,
		`{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","topology":{"ncclTopoFile":true}}`,
		`{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"PartitionConfig","topology":{}}`,
		`[]`, `null`, `{"kind":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(data)
		if err != nil {
			return
		}
		enc, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("marshal accepted config: %v", err)
		}
		c2, err := Decode(enc)
		if err != nil {
			t.Fatalf("re-decode of %s (from %q): %v", enc, data, err)
		}
		enc2, _ := json.Marshal(c2)
		if string(enc) != string(enc2) {
			t.Fatalf("not stable:\n%s\n%s", enc, enc2)
		}
	})
}
