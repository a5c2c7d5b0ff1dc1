package vfio_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/vfio"
	"github.com/tessera-gpu/tessera/internal/vfio/simfs"
)

var errStop = errors.New("stopped")

// state is where a function is: its driver and its driver_override.
func state(t *testing.T, s vfio.Sysfs, addr string) string {
	t.Helper()
	f, err := vfio.ReadFunction(s, addr)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("driver=%q override=%q", f.Driver, f.Override)
}

// TestBindRestore moves an H100 to vfio-pci and back, and an RTX card's
// two functions: the group's node is there while either is bound.
func TestBindRestore(t *testing.T) {
	tr, dev := tree(t, testHost())
	if err := vfio.Bind(tr, h100a, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := state(t, tr, h100a), `driver="vfio-pci" override="vfio-pci"`; got != want {
		t.Errorf("after Bind: %s, want %s", got, want)
	}
	if !nodeExists(dev, "17") {
		t.Error("no /dev/vfio/17 while the H100 is bound")
	}
	if err := vfio.Restore(tr, h100a, "nvidia", nil); err != nil {
		t.Fatal(err)
	}
	if got, want := state(t, tr, h100a), `driver="nvidia" override=""`; got != want {
		t.Errorf("after Restore: %s, want %s", got, want)
	}
	if nodeExists(dev, "17") {
		t.Error("/dev/vfio/17 left after the H100 went back")
	}

	for _, a := range []string{rtx, rtxHDA} {
		if err := vfio.Bind(tr, a, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := vfio.Restore(tr, rtx, "nvidia", nil); err != nil {
		t.Fatal(err)
	}
	if !nodeExists(dev, "40") {
		t.Error("/dev/vfio/40 gone while the audio function is still on vfio-pci")
	}
	if err := vfio.Restore(tr, rtxHDA, "snd_hda_intel", nil); err != nil {
		t.Fatal(err)
	}
	if nodeExists(dev, "40") || state(t, tr, rtxHDA) != `driver="snd_hda_intel" override=""` {
		t.Errorf("audio function: %s, node left %v", state(t, tr, rtxHDA), nodeExists(dev, "40"))
	}
}

// TestStopAnywhere stops Bind and Restore after each of their writes, as a
// crash would, and runs the next agent's call from there: Bind again
// finishes the passthrough, Restore gives the GPU back, whatever was done.
func TestStopAnywhere(t *testing.T) {
	bindSteps := []vfio.Step{vfio.StepOverridden, vfio.StepUnbound, vfio.StepBound}
	restoreSteps := []vfio.Step{vfio.StepCleared, vfio.StepReleased, vfio.StepRestored}
	stopAt := func(s vfio.Step) func(vfio.Step) error {
		return func(got vfio.Step) error {
			if got == s {
				return errStop
			}
			return nil
		}
	}
	bound := `driver="vfio-pci" override="vfio-pci"`
	host := `driver="nvidia" override=""`
	for _, s := range bindSteps {
		for _, next := range []string{"bind", "restore"} {
			t.Run(string(s)+"/"+next, func(t *testing.T) {
				tr, dev := tree(t, testHost())
				if err := vfio.Bind(tr, h100a, stopAt(s)); !errors.Is(err, errStop) {
					t.Fatalf("Bind stopped at %s: %v", s, err)
				}
				want := bound
				var err error
				if next == "bind" {
					err = vfio.Bind(tr, h100a, nil)
				} else {
					err, want = vfio.Restore(tr, h100a, "nvidia", nil), host
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := state(t, tr, h100a); got != want {
					t.Errorf("%s after a stop at %s: %s, want %s", next, s, got, want)
				}
				if nodeExists(dev, "17") != (want == bound) {
					t.Errorf("/dev/vfio/17 there: %v, want %v", nodeExists(dev, "17"), want == bound)
				}
			})
		}
	}
	for _, s := range restoreSteps {
		t.Run(string(s)+"/restore", func(t *testing.T) {
			tr, dev := tree(t, testHost())
			if err := vfio.Bind(tr, h100a, nil); err != nil {
				t.Fatal(err)
			}
			if err := vfio.Restore(tr, h100a, "nvidia", stopAt(s)); !errors.Is(err, errStop) {
				t.Fatalf("Restore stopped at %s: %v", s, err)
			}
			if err := vfio.Restore(tr, h100a, "nvidia", nil); err != nil {
				t.Fatal(err)
			}
			if got := state(t, tr, h100a); got != host || nodeExists(dev, "17") {
				t.Errorf("after a stop at %s and Restore: %s, node %v", s, got, nodeExists(dev, "17"))
			}
		})
	}
}

// TestRestoreSaysWhereTheDeviceWent: a device that comes back on another
// driver than it left is reported, naming both; one the kernel cannot
// bind (its driver gone) too.
func TestRestoreSaysWhereTheDeviceWent(t *testing.T) {
	tr, _ := tree(t, testHost())
	if err := vfio.Bind(tr, h100a, nil); err != nil {
		t.Fatal(err)
	}
	err := vfio.Restore(tr, h100a, "amdgpu", nil)
	if err == nil || !strings.Contains(err.Error(), "back on nvidia, want amdgpu") {
		t.Fatalf("Restore to the wrong driver: %v", err)
	}

	h := testHost()
	tr, _ = tree(t, h)
	if err := vfio.Bind(tr, h100b, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(tr.Root(), "bus/pci/drivers/nvidia")); err != nil { // the module unloaded
		t.Fatal(err)
	}
	err = vfio.Restore(tr, h100b, "nvidia", nil)
	if err == nil || !strings.Contains(err.Error(), "back on no driver, want nvidia") {
		t.Fatalf("Restore with the host driver unloaded: %v", err)
	}
}

// TestBindFailureNamesTheStep: a write the kernel refuses is reported with
// the device and what was being done.
func TestBindFailureNamesTheStep(t *testing.T) {
	tr, _ := tree(t, testHost(), simfs.WithFault(func(path, _ string) error {
		if strings.HasSuffix(path, "vfio-pci/bind") {
			return errors.New("no memory")
		}
		return nil
	}))
	err := vfio.Bind(tr, h100a, nil)
	if err == nil || !strings.Contains(err.Error(), h100a+": bind to vfio-pci") || !strings.Contains(err.Error(), "no memory") {
		t.Fatalf("Bind: %v", err)
	}
	// Restore from there: the GPU was let go and is on no driver.
	if err := vfio.Restore(tr, h100a, "nvidia", nil); err != nil {
		t.Fatal(err)
	}
}

// TestHostSysfsCreatesNothing: a write to an attribute the host lacks (a
// driver not loaded) fails and leaves no file where the kernel has none.
func TestHostSysfsCreatesNothing(t *testing.T) {
	root := t.TempDir()
	s := vfio.HostSysfs(root)
	err := s.Write("bus/pci/drivers/vfio-pci/bind", h100a)
	if err == nil {
		t.Fatal("a write to a missing attribute succeeded")
	}
	if _, serr := os.Stat(filepath.Join(root, "bus/pci/drivers/vfio-pci/bind")); serr == nil {
		t.Error("the write created the attribute")
	}
	if err := os.MkdirAll(filepath.Join(root, "bus/pci/drivers/vfio-pci"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bus/pci/drivers/vfio-pci/bind"), nil, 0o200); err != nil {
		t.Fatal(err)
	}
	if err := s.Write("bus/pci/drivers/vfio-pci/bind", h100a); err != nil {
		t.Fatalf("a write to an attribute the host has: %v", err)
	}
}
