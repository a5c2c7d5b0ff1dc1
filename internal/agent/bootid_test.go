package agent

import (
	"testing"

	"github.com/tessera-gpu/tessera/internal/host"
	"github.com/tessera-gpu/tessera/internal/sim"
)

// TestBootIDOf: the checkpoint records a simulated node's own boot id, so
// a simulated reboot (tessera-sim reboot) unconfirms its claims.
func TestBootIDOf(t *testing.T) {
	m, err := sim.Profile("t4-2", "node-1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := sim.New(m, t.TempDir(), sim.WithBootID("sim-boot"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := bootIDOf(b); err != nil || got != "sim-boot" {
		t.Errorf("bootIDOf(sim) = %q, %v; want the backend's sim-boot", got, err)
	}
	want, _ := host.BootID()
	if got, err := bootIDOf(plainBackend{b}); err != nil || got != want {
		t.Errorf("bootIDOf(a backend without a boot id) = %q, %v; want the host's %s", got, err, want)
	}
}

// plainBackend hides the sim backend's BootID, as the hardware backends
// have none.
type plainBackend struct{ *sim.Backend }

func (plainBackend) BootID() {}
