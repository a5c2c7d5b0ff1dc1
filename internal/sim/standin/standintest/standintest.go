// Package standintest lets a test binary play the simulator's MPS control
// program (the os/exec tests' re-exec trick): tests then drive real daemon
// processes speaking the real protocol without a built tessera-sim.
package standintest

import (
	"os"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/sim/standin"
)

// arg is the first argument that makes the test binary the control program.
const arg = "mps-control"

// Main is a test package's TestMain: run as "<test binary> mps-control
// [-f]" it is the stand-in (internal/sim/standin) and exits; otherwise it runs
// the tests.
func Main(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == arg {
		os.Exit(standin.Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	// A race-enabled binary sleeps a second at exit by default
	// (GORACE atexit_sleep_ms); every control command is one such exit.
	_ = os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	os.Exit(m.Run())
}

// Control is the control program's argv: this test binary in its stand-in
// role. The package's TestMain must be Main.
func Control(t testing.TB) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe, arg}
}
