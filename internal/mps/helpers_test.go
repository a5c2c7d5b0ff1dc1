package mps

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/sim/standin"
)

// The test binary doubles as the control program (the os/exec tests'
// re-exec trick): run as "<test binary> mps-control [-f]" it is the
// simulator's stand-in, a real process with the real protocol; as
// "<test binary> mps-test-sleep" it is a process that is no daemon.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "mps-control":
			os.Exit(standin.Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
		case "mps-test-sleep":
			time.Sleep(time.Hour)
			os.Exit(0)
		case "mps-test-agent":
			os.Exit(testAgent(os.Args[2:]))
		}
	}
	// A race-enabled binary sleeps a second at exit (GORACE
	// atexit_sleep_ms); every control command is one such exit here.
	_ = os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	os.Exit(m.Run())
}

// testAgent is an agent process that starts one daemon and exits without
// stopping it: args are the root, the id and the devices. It prints the
// daemon's PID.
func testAgent(args []string) int {
	exe, err := os.Executable()
	if err == nil {
		var m *Manager
		if m, err = New(Config{Root: args[0], Control: []string{exe, "mps-control"}}); err == nil {
			var d *Daemon
			if d, err = m.Start(context.Background(), DaemonSpec{ID: args[1], Devices: args[2:]}); err == nil {
				fmt.Println(d.PID)
				return 0
			}
		}
	}
	fmt.Fprintln(os.Stderr, err)
	return 1
}

// testBinary is this test binary, absolute.
func testBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// fakeControl is the control argv of the stand-in.
func fakeControl(t *testing.T) []string { return []string{testBinary(t), "mps-control"} }

// newManager returns a manager over root with the stand-in as control
// program. Every daemon under root is stopped when the test ends, even one
// a test left behind on purpose.
func newManager(t *testing.T, root string) *Manager {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	m, err := New(Config{Root: root, Control: fakeControl(t), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		list, err := m.List(ctx)
		if err != nil {
			t.Errorf("cleanup: %v", err)
		}
		for _, d := range list {
			if err := m.Stop(ctx, d.ID); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	return m
}

// testCtx is a context whose logger writes to the test's log.
func testCtx(t *testing.T) context.Context {
	_, ctx := ktesting.NewTestContext(t)
	return ctx
}

func mustStart(t *testing.T, ctx context.Context, m *Manager, spec DaemonSpec) *Daemon {
	t.Helper()
	d, err := m.Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func status(t *testing.T, pipe string) *standin.Status {
	t.Helper()
	st, err := standin.ReadStatus(pipe)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// startTime is the start time of a live pid, as the record keeps it.
func startTime(t *testing.T, pid int) uint64 {
	t.Helper()
	st, err := readStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	return st.start
}

// waitDead waits until pid (started at start) is gone; the test's deadline
// bounds it.
func waitDead(t *testing.T, pid int, start uint64) {
	t.Helper()
	if !waitGone(t.Context(), func() bool { return alive(pid, start) }, time.Hour) {
		t.Fatalf("PID %d still alive", pid)
	}
}

// sleeper starts a process that is no daemon and is killed at the test's
// end; it returns its PID and start time.
func sleeper(t *testing.T) (int, uint64) {
	t.Helper()
	cmd := exec.Command(testBinary(t), "mps-test-sleep")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd.Process.Pid, startTime(t, cmd.Process.Pid)
}

// exited runs a process to its end and returns the PID and start time it
// had: a daemon that died.
func exited(t *testing.T) (int, uint64) {
	t.Helper()
	cmd := exec.Command(testBinary(t), "mps-control", "-unknown-flag")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start := startTime(t, cmd.Process.Pid)
	_ = cmd.Wait()
	return cmd.Process.Pid, start
}

// dirExists reports whether the daemon directory of id exists.
func dirExists(t *testing.T, m *Manager, id string) bool {
	t.Helper()
	_, err := os.Lstat(filepath.Join(m.Root(), id))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return err == nil
}

// waitReaped waits (bounded) until the dead pid has left /proc: the
// manager's reaper waited for it, so it does not linger as a zombie.
func waitReaped(t *testing.T, pid int, start uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		st, err := readStat(pid)
		if err != nil || st.start != start {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("PID %d not reaped: state %c", pid, st.state)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
