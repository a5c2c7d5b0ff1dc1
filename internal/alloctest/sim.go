package alloctest

import (
	"context"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
	"github.com/tessera-gpu/tessera/internal/vfio"
)

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
	_, inv := DiscoverSim(t, profile, node)
	res, err := publish.Build(node, inv, opts)
	if err != nil {
		t.Fatal(err)
	}
	return publish.Objects(names.DriverName, node, res.Resources), res
}

// PublishSimPassthrough is PublishSimWith for an agent with --passthrough:
// each GPU whose IOMMU group can be passed (vfio.Passable on the
// simulator's PCI tree) carries its iommuGroup, which the class
// vfio.gpu.tessera.dev selects.
func PublishSimPassthrough(t testing.TB, profile, node string, opts publish.Options) ([]*resourceapi.ResourceSlice, *publish.Result) {
	t.Helper()
	b, inv := DiscoverSim(t, profile, node)
	var addrs []string
	for _, g := range inv.GPUs {
		addrs = append(addrs, g.PCIBusID)
	}
	groups, _, err := vfio.Passable(b.PCISysfs(), addrs)
	if err != nil {
		t.Fatalf("%s: IOMMU groups: %v", profile, err)
	}
	opts.IOMMUGroup = func(g *inventory.GPU) (int, bool) {
		n, ok := groups[g.PCIBusID]
		return n, ok
	}
	res, err := publish.Build(node, inv, opts)
	if err != nil {
		t.Fatal(err)
	}
	return publish.Objects(names.DriverName, node, res.Resources), res
}

// DiscoverSim starts a simulated backend for the catalogue machine profile
// on node (NewSim) and returns it with what it discovers.
func DiscoverSim(t testing.TB, profile, node string) (*sim.Backend, *inventory.Node) {
	t.Helper()
	m, err := sim.Profile(profile, node)
	if err != nil {
		t.Fatal(err)
	}
	b := NewSim(t, m)
	inv, err := b.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return b, inv
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
