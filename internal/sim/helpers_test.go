package sim

import (
	"context"
	"os"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// testLogger sends the backend's logs to the test's log.
func testLogger(t *testing.T) Option {
	logger, _ := ktesting.NewTestContext(t)
	return WithLogger(logger)
}

func writeFile(p string, data []byte) error { return os.WriteFile(p, data, 0o644) }

// mustProfile loads a catalogue machine for node-a.
func mustProfile(t *testing.T, name string) *Machine {
	t.Helper()
	m, err := Profile(name, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// enableAll turns partitioning on for every GPU that has it.
func enableAll(m *Machine) *Machine {
	for i := range m.Node.GPUs {
		if p := m.Node.GPUs[i].Partitioning; p != nil {
			p.Enabled = true
		}
	}
	return m
}

// newBackend starts a backend in a fresh state directory with boot id "boot-1".
func newBackend(t *testing.T, m *Machine) (*Backend, string) {
	t.Helper()
	dir := t.TempDir()
	b, err := New(m, dir, WithBootID("boot-1"), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return b, dir
}

func discover(t *testing.T, b *Backend) *inventory.Node {
	t.Helper()
	n, err := b.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}
