package alloctest

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/pkg/backend/sim"
	"github.com/tessera-gpu/tessera/pkg/publish"
)

// DriverName is the driver the slices are published for.
const DriverName = "gpu.tessera.dev"

// PublishSim builds the slices of a simulated catalogue machine exactly as
// the agent publishes them with static partitioning, as the objects a
// cluster would hold.
func PublishSim(t testing.TB, profile, node string) ([]*resourceapi.ResourceSlice, *publish.Result) {
	t.Helper()
	return PublishSimWith(t, profile, node, publish.Options{Partitioning: publish.Static})
}

// PublishSimWith is PublishSim with the given publishing options.
func PublishSimWith(t testing.TB, profile, node string, opts publish.Options) ([]*resourceapi.ResourceSlice, *publish.Result) {
	t.Helper()
	m, err := sim.Profile(profile, node)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := NewSim(t, m).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res, err := publish.BuildWith(node, inv, opts)
	if err != nil {
		t.Fatal(err)
	}
	return publish.Objects(DriverName, node, res.Resources), res
}

// NewSim starts a simulated backend for m with its own state directory and
// a fixed boot id, as the tests here need it.
func NewSim(t testing.TB, m *sim.Machine) *sim.Backend {
	t.Helper()
	b, err := sim.New(m, t.TempDir(), sim.WithBootID("boot"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
