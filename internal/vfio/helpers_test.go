package vfio_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-gpu/tessera/internal/vfio/simfs"
)

// The host the tests build: two H100s each alone in a group under their
// own root port, an RTX card whose audio function shares its slot and
// group, two L4s behind one switch without ACS (one group), and a T4
// sharing its group with a NIC.
const (
	h100a  = "0000:18:00.0"
	h100b  = "0000:2a:00.0"
	rtx    = "0000:41:00.0"
	rtxHDA = "0000:41:00.1"
	l4a    = "0000:61:00.0"
	l4b    = "0000:62:00.0"
	sw     = "0000:60:00.0"
	t4     = "0000:81:00.0"
	nicBDF = "0000:82:00.0"
)

func testHost() simfs.Host {
	gpu := func(addr, drv string, group int, parent string) simfs.Function {
		return simfs.Function{Address: addr, Class: 0x030200, Vendor: "0x10de", Device: "0x2330", Driver: drv, Group: group, Parent: parent, NUMANode: 0}
	}
	return simfs.Host{IOMMU: true, VFIO: true, Functions: []simfs.Function{
		gpu(h100a, "nvidia", 17, "pci0000:15/0000:16:01.0"),
		{Address: "0000:16:01.0", Class: 0x060400, Vendor: "0x8086", Driver: "pcieport", Group: 16, Parent: "pci0000:15"},
		gpu(h100b, "nvidia", 29, "pci0000:28/0000:29:01.0"),
		gpu(rtx, "nvidia", 40, "pci0000:40"),
		{Address: rtxHDA, Class: 0x040300, Vendor: "0x10de", Driver: "snd_hda_intel", Group: 40, Parent: "pci0000:40"},
		{Address: sw, Class: 0x060400, Vendor: "0x10b5", Driver: "pcieport", Group: 60, Parent: "pci0000:5f"},
		gpu(l4a, "nvidia", 60, "pci0000:5f/0000:60:00.0"),
		gpu(l4b, "nvidia", 60, "pci0000:5f/0000:60:00.0"),
		gpu(t4, "nvidia", 80, "pci0000:80"),
		{Address: nicBDF, Class: 0x020000, Vendor: "0x15b3", Driver: "mlx5_core", Group: 80, Parent: "pci0000:80"},
	}}
}

// tree builds h in a temporary directory, its group nodes as files below
// dev.
func tree(t *testing.T, h simfs.Host, opts ...simfs.Option) (tr *simfs.Tree, dev string) {
	t.Helper()
	dir := t.TempDir()
	dev = filepath.Join(dir, "dev")
	tr, err := simfs.Build(filepath.Join(dir, "sys"), h, append([]simfs.Option{simfs.WithGroupNodes(simfs.FileNodes(dev))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return tr, dev
}

func nodeExists(dev string, g string) bool {
	_, err := os.Stat(filepath.Join(dev, "vfio", g))
	return err == nil
}
