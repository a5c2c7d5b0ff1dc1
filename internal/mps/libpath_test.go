package mps

import (
	"maps"
	"testing"
)

// TestLaunchLibraryPath: a daemon of a driver root gets the root's library
// directory as LD_LIBRARY_PATH (the MPS server loads libcuda from it);
// without one its environment is the four variables it always had.
func TestLaunchLibraryPath(t *testing.T) {
	spec := DaemonSpec{ID: "d1", Devices: []string{"GPU-1"}}
	base := map[string]string{
		envVisibleDevices: "GPU-1",
		envPipeDir:        "/r/d1/pipe",
		envLogDir:         "/r/d1/log",
		EnvDaemonID:       "d1",
	}
	withLib := maps.Clone(base)
	withLib[EnvLibraryPath] = "/driver-root/usr/lib/x86_64-linux-gnu"
	for _, tc := range []struct {
		name, lib string
		want      map[string]string
	}{
		{name: "no driver root", want: base},
		{name: "driver root", lib: "/driver-root/usr/lib/x86_64-linux-gnu", want: withLib},
	} {
		m := &Manager{root: "/r", control: []string{"/driver-root/usr/bin/nvidia-cuda-mps-control"}, libraryPath: tc.lib}
		if got := m.launchOf(spec).Env; !maps.Equal(got, tc.want) {
			t.Errorf("%s: env %v; want %v", tc.name, got, tc.want)
		}
	}
}
