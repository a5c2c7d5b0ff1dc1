package inspect

import (
	"flag"
	"path/filepath"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
)

// updating says whether -update (pkg/inspect/inspecttest's flag, linked in
// by this package's external tests) asks golden files to be rewritten.
func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

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
