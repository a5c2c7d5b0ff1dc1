package simfs

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

const (
	gpu   = "0000:18:00.0"
	audio = "0000:18:00.1"
)

func host() Host {
	return Host{IOMMU: true, VFIO: true, Functions: []Function{
		{Address: gpu, Class: 0x030000, Vendor: "0x1002", Device: "0x74a1", Driver: "amdgpu", Group: 7, Parent: "pci0000:15/0000:16:01.0"},
		{Address: audio, Class: 0x040300, Vendor: "0x1002", Driver: "snd_hda_intel", Group: 7, Parent: "pci0000:15/0000:16:01.0"},
	}}
}

func build(t *testing.T) (*Tree, string) {
	t.Helper()
	dir := t.TempDir()
	dev := filepath.Join(dir, "dev")
	tr, err := Build(filepath.Join(dir, "sys"), host(), WithGroupNodes(FileNodes(dev)))
	if err != nil {
		t.Fatal(err)
	}
	return tr, dev
}

// TestKernelAnswers: each write does what the kernel does, or fails as
// the kernel does, changing nothing.
func TestKernelAnswers(t *testing.T) {
	type write struct{ path, value string }
	cases := []struct {
		name   string
		before []write
		w      write
		err    error
		driver string // the GPU's after
	}{
		{name: "bind to a driver that does not match", before: []write{{"bus/pci/drivers/amdgpu/unbind", gpu}},
			w: write{"bus/pci/drivers/vfio-pci/bind", gpu}, err: syscall.ENODEV},
		{name: "bind a bound device", w: write{"bus/pci/drivers/amdgpu/bind", gpu}, err: syscall.EBUSY, driver: "amdgpu"},
		{name: "unbind from a driver that does not hold it", w: write{"bus/pci/drivers/vfio-pci/unbind", gpu}, err: syscall.ENODEV, driver: "amdgpu"},
		{name: "unbind through the device's driver link", w: write{"bus/pci/devices/" + gpu + "/driver/unbind", gpu}},
		{name: "override, unbind, bind", before: []write{{"bus/pci/devices/" + gpu + "/driver_override", "vfio-pci"}, {"bus/pci/drivers/amdgpu/unbind", gpu}},
			w: write{"bus/pci/drivers/vfio-pci/bind", gpu}, driver: "vfio-pci"},
		{name: "override: only it may bind", before: []write{{"bus/pci/devices/" + gpu + "/driver_override", "vfio-pci"}, {"bus/pci/drivers/amdgpu/unbind", gpu}},
			w: write{"bus/pci/drivers/amdgpu/bind", gpu}, err: syscall.ENODEV},
		{name: "probe picks the override", before: []write{{"bus/pci/devices/" + gpu + "/driver_override", "vfio-pci"}, {"bus/pci/drivers/amdgpu/unbind", gpu}},
			w: write{"bus/pci/drivers_probe", gpu}, driver: "vfio-pci"},
		{name: "a newline clears the override, probe picks the default", before: []write{{"bus/pci/devices/" + gpu + "/driver_override", "vfio-pci"}, {"bus/pci/drivers/amdgpu/unbind", gpu}, {"bus/pci/devices/" + gpu + "/driver_override", "\n"}},
			w: write{"bus/pci/drivers_probe", gpu}, driver: "amdgpu"},
		{name: "probe of a bound device does nothing", w: write{"bus/pci/drivers_probe", gpu}, driver: "amdgpu"},
		{name: "a read-only attribute", w: write{"bus/pci/devices/" + gpu + "/class", "0x020000"}, err: syscall.EACCES, driver: "amdgpu"},
		{name: "outside the tree", w: write{"../escape", "x"}, err: syscall.EINVAL, driver: "amdgpu"},
		{name: "no such device", w: write{"bus/pci/drivers/amdgpu/bind", "0000:99:00.0"}, err: syscall.ENODEV, driver: "amdgpu"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr, _ := build(t)
			for _, w := range tc.before {
				if err := tr.Write(w.path, w.value); err != nil {
					t.Fatalf("write %s: %v", w.path, err)
				}
			}
			err := tr.Write(tc.w.path, tc.w.value)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("write %s = %q: %v, want %v", tc.w.path, tc.w.value, err, tc.err)
			}
			if d, _ := tr.Driver(gpu); d != tc.driver {
				t.Errorf("GPU on %q, want %q", d, tc.driver)
			}
		})
	}
}

// TestGroupNodeAndReopen: the group's node is there while a function of
// it is on vfio-pci; a tree opened again keeps the bindings, one built
// again (a reboot) has none.
func TestGroupNodeAndReopen(t *testing.T) {
	tr, dev := build(t)
	for _, w := range [][2]string{
		{"bus/pci/devices/" + gpu + "/driver_override", "vfio-pci"}, {"bus/pci/drivers/amdgpu/unbind", gpu}, {"bus/pci/drivers/vfio-pci/bind", gpu},
	} {
		if err := tr.Write(w[0], w[1]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dev, "vfio", "7")); err != nil {
		t.Fatalf("group 7's node: %v", err)
	}
	if g, err := tr.Groups(); err != nil || !slices.Equal(g, []int{7}) {
		t.Fatalf("Groups = %v, %v; want [7]", g, err)
	}
	if tr.Writes() != 2 {
		t.Errorf("Writes = %d, want 2 (an unbind and a bind)", tr.Writes())
	}
	again, err := Open(tr.Root(), host())
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := again.Driver(gpu); d != "vfio-pci" {
		t.Errorf("reopened: GPU on %q, want vfio-pci", d)
	}
	rebooted, err := Build(tr.Root(), host())
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := rebooted.Driver(gpu); d != "amdgpu" {
		t.Errorf("rebuilt: GPU on %q, want amdgpu", d)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "none"), host()); err == nil {
		t.Error("Open of an empty directory succeeded")
	}
}
