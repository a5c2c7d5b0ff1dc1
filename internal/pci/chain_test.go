package pci

import (
	"slices"
	"testing"
)

func TestChain(t *testing.T) {
	for _, tc := range []struct {
		path, bdf, root string
		bridges         []string
		ok              bool
	}{
		// A DGX-style GPU behind a PCIe switch: root port, switch up and
		// down ports.
		{"../../../devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0", "0000:18:00.0", "pci0000:15",
			[]string{"0000:15:01.0", "0000:16:00.0", "0000:17:00.0"}, true},
		// A GPU right under its root port.
		{"/sys/devices/pci0000:00/0000:00:03.0/0000:01:00.0", "0000:01:00.0", "pci0000:00", []string{"0000:00:03.0"}, true},
		// A GPU on the root bus itself.
		{"/sys/devices/pci0008:00/0008:00:00.0", "0008:00:00.0", "pci0008:00", nil, true},
		// VMD's domain above ffff.
		{"/sys/devices/pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:06.0/10000:e1:00.0", "10000:e1:00.0", "pci0000:00",
			[]string{"0000:00:0e.0", "10000:e0:06.0"}, true},
		{"/sys/devices/platform/foo/0000:18:00.0", "0000:18:00.0", "", nil, false},
	} {
		root, bridges, ok := Chain(tc.path, tc.bdf)
		if root != tc.root || !slices.Equal(bridges, tc.bridges) || ok != tc.ok {
			t.Errorf("Chain(%s) = %s %v %v, want %s %v %v", tc.path, root, bridges, ok, tc.root, tc.bridges, tc.ok)
		}
	}
}
