package localcluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A component restarted by hand (not in the state file) and running from
// the cluster's binaries with the cluster's directory on its command line
// is stopped by Down; a process of another binary naming the same
// directory is not.
func TestDownStopsStrays(t *testing.T) {
	tail, err := exec.LookPath("tail")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	c := &Config{Dir: filepath.Join(root, "cluster"), BinDir: filepath.Join(root, "bin")}
	if err := os.MkdirAll(c.BinDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A copy of tail stands in for a cluster binary: it runs until
	// stopped, with a path in the cluster's directory on its command line.
	data, err := os.ReadFile(tail)
	if err != nil {
		t.Fatal(err)
	}
	ours := filepath.Join(c.BinDir, "kubelet")
	if err := os.WriteFile(ours, data, 0o755); err != nil {
		t.Fatal(err)
	}
	start := func(bin string, args ...string) *exec.Cmd {
		cmd := exec.Command(bin, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	log := filepath.Join(c.Dir, "kubelet.log")
	if err := os.WriteFile(log, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	stray := start(ours, "-f", log)
	other := start(tail, "-f", log) // someone reading the log
	for _, cmd := range []*exec.Cmd{stray, other} {
		if err := syscall.Kill(cmd.Process.Pid, 0); err != nil {
			t.Fatalf("pid %d not running: %v", cmd.Process.Pid, err)
		}
	}
	var out strings.Builder
	done := make(chan []error, 1)
	go func() { done <- c.stopStrays(&out, nil) }()
	exited := make(chan error, 1)
	go func() { exited <- stray.Wait() }()
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("stray not stopped; Down said %q", out.String())
	}
	if errs := <-done; len(errs) > 0 {
		t.Fatal(errs)
	}
	if !strings.Contains(out.String(), "stopping kubelet") {
		t.Errorf("Down said %q", out.String())
	}
	if err := syscall.Kill(other.Process.Pid, 0); err != nil {
		t.Errorf("a process of another binary was stopped: %v", err)
	}
}
