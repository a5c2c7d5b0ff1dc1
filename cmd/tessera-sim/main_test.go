package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/sim"
)

func TestRun(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		status int
		stderr string
	}{
		{name: "no subcommand", status: 2, stderr: "mps-control"},
		{name: "help", args: []string{"help"}, status: 0, stderr: "usage: tessera-sim"},
		{name: "unknown subcommand", args: []string{"fly"}, status: 2, stderr: `unknown subcommand "fly"`},
		{name: "subcommand's own usage error", args: []string{"mps-control", "-d"}, status: 2, stderr: "unsupported arguments"},
		{name: "load without a state dir", args: []string{"load", "--util=5"}, status: 2, stderr: "--state-dir and --device are required"},
		{name: "reboot without a state dir", args: []string{"reboot"}, status: 2, stderr: "--state-dir is required"},
		{name: "imex listed", status: 2, stderr: "imex-ctl"},
		{name: "imex without a config", args: []string{"imex", "-c", "/nonexistent/config.cfg"}, status: 1, stderr: "/nonexistent/config.cfg"},
		{name: "imex-ctl without -q", args: []string{"imex-ctl"}, status: 2, stderr: "only -q"},
		{name: "imex-ctl without a daemon", args: []string{"imex-ctl", "-c", "/nonexistent/config.cfg", "-q"}, status: 1, stderr: "/nonexistent/config.cfg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := run(tt.args, strings.NewReader(""), &stdout, &stderr); got != tt.status || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("run(%q) = %d, stderr %q; want %d with %q", tt.args, got, stderr.String(), tt.status, tt.stderr)
			}
		})
	}
}

// TestArgsAs: under a driver program's name it is that program's
// stand-in, so that a driver root can hold it as nvidia-cuda-mps-control,
// nvidia-imex and nvidia-imex-ctl.
func TestArgsAs(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{name: "/driver-root/usr/bin/nvidia-cuda-mps-control", args: []string{"-f"}, want: []string{"mps-control", "-f"}},
		{name: "nvidia-cuda-mps-control", want: []string{"mps-control"}},
		{name: "/usr/bin/tessera-sim", args: []string{"mps-control", "-f"}, want: []string{"mps-control", "-f"}},
		{name: "/usr/bin/nvidia-cuda-mps-control-old", args: []string{"-f"}, want: []string{"-f"}},
		{name: "/driver-root/usr/bin/nvidia-imex", args: []string{"-c", "/etc/nvidia-imex/config.cfg"}, want: []string{"imex", "-c", "/etc/nvidia-imex/config.cfg"}},
		{name: "nvidia-imex-ctl", args: []string{"-q"}, want: []string{"imex-ctl", "-q"}},
		{name: "/usr/bin/nvidia-imex-ctl.sh", args: []string{"-q"}, want: []string{"-q"}},
	} {
		if got := argsAs(tc.name, tc.args); !slices.Equal(got, tc.want) {
			t.Errorf("argsAs(%q, %q) = %q; want %q", tc.name, tc.args, got, tc.want)
		}
	}
}

// TestReboot: each reboot writes a new boot id where the node's backend
// reads it, and says so.
func TestReboot(t *testing.T) {
	dir := t.TempDir()
	var ids []string
	for range 2 {
		var stdout, stderr bytes.Buffer
		if got := run([]string{"reboot", "--state-dir=" + dir}, strings.NewReader(""), &stdout, &stderr); got != 0 {
			t.Fatalf("reboot = %d, stderr %q", got, stderr.String())
		}
		id, err := sim.ReadBootID(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(stdout.String(), "boot id "+id) {
			t.Errorf("reboot said %q, want the boot id %s", stdout.String(), id)
		}
		ids = append(ids, id)
	}
	if ids[0] == ids[1] {
		t.Errorf("two reboots wrote the same boot id %s", ids[0])
	}
	if _, err := os.Stat(filepath.Join(dir, sim.BootIDFile)); err != nil {
		t.Error(err)
	}
}
