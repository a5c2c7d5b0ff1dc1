package localcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeDriverRoot: the driver root holds a copy of tessera-sim as the
// driver's MPS control program, executable; taking it out and back works,
// and a missing tessera-sim says how to build it.
func TestMakeDriverRoot(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &Config{Dir: filepath.Join(dir, "cluster"), PluginBin: filepath.Join(bin, "tessera-kubelet-plugin")}
	if err := c.makeDriverRoot("n1"); err == nil || !strings.Contains(err.Error(), "make build") {
		t.Fatalf("without tessera-sim: %v; want an error saying make build", err)
	}
	if err := os.WriteFile(filepath.Join(bin, "tessera-sim"), []byte("stand-in"), 0o755); err != nil {
		t.Fatal(err)
	}
	control := filepath.Join(c.DriverRoot("n1"), DriverRootControl)
	check := func(when string) {
		t.Helper()
		fi, err := os.Lstat(control)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o755 {
			t.Fatalf("%s: %s: %v, %v; want a regular file of mode 0755", when, control, fi, err)
		}
		if b, _ := os.ReadFile(control); string(b) != "stand-in" {
			t.Errorf("%s: %s holds %q, not tessera-sim", when, control, b)
		}
	}
	if err := c.makeDriverRoot("n1"); err != nil {
		t.Fatal(err)
	}
	check("made")
	if err := c.RemoveDriverRootControl("n1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(control); !os.IsNotExist(err) {
		t.Errorf("removed: %v", err)
	}
	if err := c.RestoreDriverRootControl("n1"); err != nil {
		t.Fatal(err)
	}
	check("restored")
}
