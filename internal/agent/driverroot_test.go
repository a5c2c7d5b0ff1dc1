package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// TestDriverMPSControl: the control program comes from the driver root,
// --mps-control wins, and a root without it stops the agent naming the
// paths tried.
func TestDriverMPSControl(t *testing.T) {
	mount := t.TempDir()
	withControl := t.TempDir()
	bin := filepath.Join(withControl, "usr/sbin/nvidia-cuda-mps-control")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		cfg     Config
		want    []string
		wantErr []string
	}{
		{name: "no driver root", cfg: Config{}},
		{name: "--mps-control wins", cfg: Config{NvidiaDriverRoot: "/", NvidiaDriverRootMount: mount, MPSControl: "/opt/x -y"}},
		{name: "found", cfg: Config{NvidiaDriverRoot: "/run/nvidia/driver", NvidiaDriverRootMount: withControl}, want: []string{bin}},
		{name: "missing", cfg: Config{NvidiaDriverRoot: "/run/nvidia/driver", NvidiaDriverRootMount: mount},
			wantErr: []string{"nvidia-cuda-mps-control not found under the driver root /run/nvidia/driver (mounted at " + mount, filepath.Join(mount, "usr/bin/nvidia-cuda-mps-control"), filepath.Join(mount, "opt/bin/nvidia-cuda-mps-control")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.cfg.driverMPSControl(klog.Background())
			if len(tc.wantErr) > 0 {
				for _, w := range tc.wantErr {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("driverMPSControl = %q, %v; want an error saying %q", got, err, w)
					}
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("driverMPSControl = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestNVMLLibraryMissing: with a driver root, NVML's absence names the
// library, the root and every path tried, which is what --backend=auto's
// "no GPUs found" then says.
func TestNVMLLibraryMissing(t *testing.T) {
	mount := t.TempDir()
	c := &Config{NvidiaDriverRoot: "/", NvidiaDriverRootMount: mount}
	ok, why := detectNVML(c, klog.Background())
	for _, w := range []string{"libnvidia-ml.so.1 not found under the driver root / (mounted at " + mount, filepath.Join(mount, "usr/lib64/libnvidia-ml.so.1"), filepath.Join(mount, "lib/aarch64-linux-gnu/libnvidia-ml.so.1")} {
		if ok || !strings.Contains(why, w) {
			t.Errorf("detectNVML = %v, %q; want false saying %q", ok, why, w)
		}
	}
}

func TestValidateDriverRoot(t *testing.T) {
	for _, tc := range []struct {
		root, mount string
		wantErr     string
	}{
		{root: "/", mount: "/driver-root"},
		{root: "/run/nvidia/driver"},
		{},
		{root: "run/nvidia/driver", wantErr: "--nvidia-driver-root"},
		{mount: "/driver-root", wantErr: "without --nvidia-driver-root"},
	} {
		c := Config{NodeName: "n", NvidiaDriverRoot: tc.root, NvidiaDriverRootMount: tc.mount, LegacyMPSShares: "whole", Partitioning: "static", Sharing: "none", MPSDaemons: MPSDaemonsProcess, ProfilingAddress: DefaultProfilingAddress}
		err := c.Validate()
		if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("Validate(root %q, mount %q) = %v; want error %q", tc.root, tc.mount, err, tc.wantErr)
		}
	}
}
