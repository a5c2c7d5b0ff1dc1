package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/vfio"
)

// TestHoldBind: while a test's hold file for a GPU exists, a passthrough
// of it stops between the host driver's unbind and vfio-pci's bind (the
// GPU on no driver) and goes on once the file is removed; other GPUs'
// binds are not held.
func TestHoldBind(t *testing.T) {
	m := mustProfile(t, "dgx-h100")
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	dir := t.TempDir()
	b, err := New(m, dir, WithBootID("boot-1"), WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	held, free := m.Node.GPUs[0].PCIBusID, m.Node.GPUs[1].PCIBusID
	hold := HoldBindPath(dir, held)
	if err := os.MkdirAll(filepath.Dir(hold), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := vfio.Bind(b.PCISysfs(), free, nil); err != nil {
		t.Fatalf("bind of %s, which no file holds: %v", free, err)
	}

	done := make(chan error, 1)
	go func() { done <- vfio.Bind(b.PCISysfs(), held, nil) }()
	// The held write logs once it waits: from then on it cannot finish
	// while the file exists.
	buf := logger.GetSink().(ktesting.Underlier).GetBuffer()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(buf.String(), hold); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the bind of %s never waited on %s", held, hold)
		}
	}
	select {
	case err := <-done:
		t.Fatalf("the bind of %s finished while held: %v", held, err)
	default:
	}
	if d, err := vfio.DriverOf(b.PCISysfs(), held); err != nil || d != "" {
		t.Fatalf("held GPU %s on %q (%v), want no driver", held, d, err)
	}
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("bind of %s after the hold: %v", held, err)
	}
	if d, _ := vfio.DriverOf(b.PCISysfs(), held); d != vfio.Driver {
		t.Errorf("%s on %q after the hold, want %s", held, d, vfio.Driver)
	}
}
