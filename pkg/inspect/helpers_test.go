package inspect

import (
	"path/filepath"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

func load(t *testing.T, files ...string) *Snapshot {
	t.Helper()
	var paths []string
	for _, f := range files {
		paths = append(paths, filepath.Join("testdata", f))
	}
	s, err := LoadFiles(paths)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// taint adds a taint to every device named device.
func taint(s *Snapshot, device string, tn resourceapi.DeviceTaint) {
	for i := range s.Slices {
		for j := range s.Slices[i].Spec.Devices {
			if d := &s.Slices[i].Spec.Devices[j]; d.Name == device {
				d.Taints = append(d.Taints, tn)
			}
		}
	}
}
