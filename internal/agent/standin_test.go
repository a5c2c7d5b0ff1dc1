package agent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSimBackendNeedsTheStandIn: --backend=sim refuses to start when
// tessera-sim is not an executable beside the agent (the production image),
// naming the file and the image that has it; a dry run and an explicit
// --mps-control do not need it.
func TestSimBackendNeedsTheStandIn(t *testing.T) {
	tests := []struct {
		name    string
		standIn func(t *testing.T, path string) // what is at tessera-sim's path
		cfg     Config
		wantErr []string // nil: starts
	}{
		{name: "missing", standIn: func(*testing.T, string) {},
			wantErr: []string{"tessera-sim", "no such file", SimImage, "--target tessera-kubelet-plugin-sim", "--mps-control"}},
		{name: "a directory", standIn: func(t *testing.T, p string) { mkdir(t, p) },
			wantErr: []string{"tessera-sim", "not an executable file", SimImage}},
		{name: "not executable", standIn: func(t *testing.T, p string) { writeFile(t, p, 0o644) },
			wantErr: []string{"tessera-sim", "not an executable file", SimImage}},
		{name: "present", standIn: func(t *testing.T, p string) { writeFile(t, p, 0o755) }},
		{name: "missing, dry run", standIn: func(*testing.T, string) {}, cfg: Config{DryRun: true}},
		{name: "missing, --mps-control set", standIn: func(*testing.T, string) {}, cfg: Config{MPSControl: "/opt/mps/control --x"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			standIn := filepath.Join(dir, "tessera-sim")
			tc.standIn(t, standIn)
			executable = func() (string, error) { return filepath.Join(dir, "tessera-kubelet-plugin"), nil }
			t.Cleanup(func() { executable = os.Executable })
			c := tc.cfg
			c.Backend, c.SimProfile, c.NodeName, c.SimStateDir = "sim", "dgx-h100", "n", t.TempDir()
			b, err := NewBackend(context.Background(), &c)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("NewBackend: %v", err)
				}
				if b.Name() != "sim" {
					t.Errorf("backend %s", b.Name())
				}
				return
			}
			if err == nil {
				t.Fatal("NewBackend started without the stand-in")
			}
			for _, w := range append([]string{standIn}, tc.wantErr...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	// The default is the stand-in beside the agent, with its subcommand.
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "tessera-sim"), 0o755)
	executable = func() (string, error) { return filepath.Join(dir, "tessera-kubelet-plugin"), nil }
	t.Cleanup(func() { executable = os.Executable })
	got, err := (&Config{}).simMPSControl()
	if want := []string{filepath.Join(dir, "tessera-sim"), "mps-control"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("simMPSControl = %q, %v; want %q", got, err, want)
	}
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, p string, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), perm); err != nil {
		t.Fatal(err)
	}
	// The umask must not decide the test.
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
}
