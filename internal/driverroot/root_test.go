package driverroot

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tree makes files (mode per entry; a "->" value is a link) under a new
// directory and returns it.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, v := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasPrefix(v, "->"):
			err = os.Symlink(strings.TrimPrefix(v, "->"), full)
		case v == "dir":
			err = os.Mkdir(full, 0o755)
		case v == "exec":
			err = os.WriteFile(full, []byte("#!/bin/true\n"), 0o755)
		default:
			err = os.WriteFile(full, []byte("lib"), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestLibrary(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		want    string // relative to the root
		wantDir string
		wantErr []string
	}{
		{name: "debian multiarch", files: map[string]string{"usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1": "file"}, want: "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", wantDir: "usr/lib/x86_64-linux-gnu"},
		{name: "lib64 first", files: map[string]string{"usr/lib64/libnvidia-ml.so.1": "file", "lib64/libnvidia-ml.so.1": "file"}, want: "usr/lib64/libnvidia-ml.so.1", wantDir: "usr/lib64"},
		{name: "relative link resolved", files: map[string]string{
			"usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1":         "->libnvidia-ml.so.580.65.06",
			"usr/lib/aarch64-linux-gnu/libnvidia-ml.so.580.65.06": "file",
		}, want: "usr/lib/aarch64-linux-gnu/libnvidia-ml.so.580.65.06", wantDir: "usr/lib/aarch64-linux-gnu"},
		{name: "absolute link stays in the root", files: map[string]string{
			"usr/lib64/libnvidia-ml.so.1":  "->/opt/nvidia/libnvidia-ml.so.1",
			"opt/nvidia/libnvidia-ml.so.1": "file",
		}, want: "opt/nvidia/libnvidia-ml.so.1", wantDir: "usr/lib64"},
		{name: "dangling absolute link: not the container's file", files: map[string]string{
			"usr/lib64/libnvidia-ml.so.1": "->/etc/hostname",
		}, wantErr: []string{"libnvidia-ml.so.1 not found", "usr/lib64/libnvidia-ml.so.1", "lib/aarch64-linux-gnu/libnvidia-ml.so.1"}},
		{name: "directory named like it", files: map[string]string{"lib64/libnvidia-ml.so.1": "dir"},
			wantErr: []string{"lib64/libnvidia-ml.so.1: not a regular file"}},
		{name: "link loop", files: map[string]string{"lib64/libnvidia-ml.so.1": "->libnvidia-ml.so.1"},
			wantErr: []string{"too many links"}},
		{name: "no driver", files: map[string]string{"usr/bin/ls": "exec"},
			wantErr: []string{"libnvidia-ml.so.1 not found under the driver root", "tried", "usr/lib64/libnvidia-ml.so.1", "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tree(t, tc.files)
			r, err := New("/run/nvidia/driver", dir)
			if err != nil {
				t.Fatal(err)
			}
			got, gotDir, err := r.Library(NVML)
			if len(tc.wantErr) > 0 {
				var nf *NotFoundError
				if err == nil || !errors.As(err, &nf) {
					t.Fatalf("Library = %q, %v; want a NotFoundError", got, err)
				}
				for _, w := range append(tc.wantErr, "/run/nvidia/driver (mounted at "+dir+")") {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if want, wantDir := filepath.Join(dir, tc.want), filepath.Join(dir, tc.wantDir); err != nil || got != want || gotDir != wantDir {
				t.Errorf("Library = %q, %q, %v; want %q, %q", got, gotDir, err, want, wantDir)
			}
		})
	}
}

func TestBinary(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string
		want    string
		wantErr string
	}{
		{name: "usr/bin", files: map[string]string{"usr/bin/nvidia-cuda-mps-control": "exec"}, want: "usr/bin/nvidia-cuda-mps-control"},
		{name: "a link is named by its candidate", files: map[string]string{"bin": "->usr/bin", "usr/bin/x": "exec", "sbin/nvidia-cuda-mps-control": "->/opt/real", "opt/real": "exec"}, want: "sbin/nvidia-cuda-mps-control"},
		{name: "not executable", files: map[string]string{"usr/bin/nvidia-cuda-mps-control": "file"}, wantErr: "usr/bin/nvidia-cuda-mps-control: not an executable regular file"},
		{name: "missing", files: map[string]string{"usr/lib64/libnvidia-ml.so.1": "file"}, wantErr: "nvidia-cuda-mps-control not found under the driver root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tree(t, tc.files)
			r, err := New(dir, "")
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.Binary(MPSControl)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), filepath.Join(dir, "opt/bin", MPSControl)) {
					t.Fatalf("Binary = %q, %v; want an error saying %q and every path tried", got, err, tc.wantErr)
				}
				return
			}
			if want := filepath.Join(dir, tc.want); err != nil || got != want {
				t.Errorf("Binary = %q, %v; want %q", got, err, want)
			}
		})
	}
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		host, mount string
		want        Root
		ok          bool
	}{
		{host: "/", mount: "/driver-root", want: Root{Host: "/", Mount: "/driver-root"}, ok: true},
		{host: "/run/nvidia/driver", want: Root{Host: "/run/nvidia/driver", Mount: "/run/nvidia/driver"}, ok: true},
		{host: "run/nvidia/driver"},
		{host: "/run/nvidia/driver/", mount: "/driver-root"},
		{host: "/", mount: "/driver-root/../etc"},
	} {
		got, err := New(tc.host, tc.mount)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("New(%q, %q) = %+v, %v; want %+v, ok %v", tc.host, tc.mount, got, err, tc.want, tc.ok)
		}
	}
}
