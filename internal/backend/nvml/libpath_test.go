//go:build cgo && linux

package nvml

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestLibraryPathNotLoadable: NVML pointed at a library path that does not
// load (a driver root's file that is no library) names the path and the
// flag, and Detect says the same to --backend=auto.
func TestLibraryPathNotLoadable(t *testing.T) {
	p := filepath.Join(t.TempDir(), "libnvidia-ml.so.1")
	for _, tc := range []struct {
		name string
		err  func() string
	}{
		{"initLib", func() string {
			if err := initLib(newLib(p)); err != nil {
				return err.Error()
			}
			return ""
		}},
		{"Detect", func() string {
			ok, why := Detect(p)
			if ok {
				return ""
			}
			return why
		}},
	} {
		got := tc.err()
		for _, w := range []string{p, "could not be loaded", "--nvidia-driver-root"} {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q does not say %q", tc.name, got, w)
			}
		}
	}
}
