// Package inspecttest is what the tests of the kubectl-tessera commands
// share: the snapshots in internal/inspect/testdata and their golden output.
package inspecttest

import (
	"path/filepath"
	"runtime"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/golden"
	"github.com/tessera-gpu/tessera/internal/inspect"
)

// Testdata is the path of elem in internal/inspect/testdata, wherever the test
// runs: the fixtures are shared by the commands' packages.
func Testdata(elem ...string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(append([]string{filepath.Dir(file), "..", "testdata"}, elem...)...)
}

// Load reads a Snapshot from files of internal/inspect/testdata.
func Load(t *testing.T, files ...string) *inspect.Snapshot {
	t.Helper()
	var paths []string
	for _, f := range files {
		paths = append(paths, Testdata(f))
	}
	s, err := inspect.LoadFiles(paths)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Golden compares got with the file at path under internal/inspect/testdata
// (internal/golden: -update rewrites it).
func Golden(t *testing.T, path string, got []byte) {
	t.Helper()
	golden.Compare(t, Testdata(path), got)
}

// Taint adds a taint to every device named device.
func Taint(s *inspect.Snapshot, device string, tn resourceapi.DeviceTaint) {
	for i := range s.Slices {
		for j := range s.Slices[i].Spec.Devices {
			if d := &s.Slices[i].Spec.Devices[j]; d.Name == device {
				d.Taints = append(d.Taints, tn)
			}
		}
	}
}
