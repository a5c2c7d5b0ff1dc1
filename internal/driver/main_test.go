package driver

import (
	"testing"

	"github.com/tessera-gpu/tessera/internal/mps/mpstest"
)

// TestMain lets the test binary be the MPS control stand-in (mpstest).
func TestMain(m *testing.M) { mpstest.Main(m) }
