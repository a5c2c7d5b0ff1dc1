// Package golden compares test output with files kept in a testdata folder,
// and rewrites them when a test binary runs with -update. Golden files pin
// bytes a change must not move by accident (CDI specs, the checkpoint, the
// simulator's device tree, kubectl tessera's output): rewrite them only
// for a deliberate change, as each testdata's SOURCE.md says.
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files from the current output (only for a deliberate change: see the testdata's SOURCE.md)")

// Updating reports whether this run rewrites golden files (-update).
func Updating() bool { return *update }

// Compare fails t unless got is what the file at path holds; with -update
// it writes got there instead (creating its folder).
func Compare(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run this test with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (run this test with -update to rewrite it, for a deliberate change only)\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}
