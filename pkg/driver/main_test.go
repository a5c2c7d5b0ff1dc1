package driver

import (
	"os"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/pkg/mps/standin"
)

// TestMain lets the test binary be the simulator's MPS control program
// (pkg/mps/standin), so sharing benchmarks start real daemon processes.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "mps-control" {
		os.Exit(standin.Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	// A race-enabled binary sleeps a second at exit by default; every MPS
	// control command is one such exit.
	_ = os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	os.Exit(m.Run())
}
