package sim

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-gpu/tessera/internal/imex"
)

// TestProcIMEX: a simulated NVIDIA node's /proc offers the driver's IMEX
// channels as internal/imex reads them from a real one; an AMD node's
// has none.
func TestProcIMEX(t *testing.T) {
	for profile, want := range map[string]error{"gb200-nvl72-tray": nil, "mi300x-8": imex.ErrNoChannels} {
		m, err := Profile(profile, "node-1")
		if err != nil {
			t.Fatal(err)
		}
		b, err := New(m, t.TempDir(), WithBootID("b"))
		if err != nil {
			t.Fatal(err)
		}
		major, count, err := (imex.Host{ProcRoot: b.ProcRoot()}).Channels()
		if want != nil {
			if _, statErr := os.Stat(filepath.Join(b.ProcRoot(), "devices")); !errors.Is(statErr, os.ErrNotExist) {
				t.Errorf("%s: a /proc/devices without NVIDIA GPUs", profile)
			}
			continue
		}
		if err != nil || major != simIMEXMajor || count != 2048 {
			t.Errorf("%s: %d, %d, %v", profile, major, count, err)
		}
	}
}
