package driver

import (
	"testing"

	"github.com/tessera-gpu/tessera/internal/sim/standin/standintest"
)

// TestMain lets the test binary be the MPS control stand-in (standintest).
func TestMain(m *testing.M) { standintest.Main(m) }
