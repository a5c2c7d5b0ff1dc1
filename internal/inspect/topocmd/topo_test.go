package topocmd

import (
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/inspect/inspecttest"
)

func TestLink(t *testing.T) {
	numa := func(n int64) *int64 { return &n }
	pcie := func(dev, root string, n *int64) GPU {
		return GPU{Device: dev, Fabric: "pcie", Island: "pcie-" + dev, PCIeRoot: root, NUMANode: n}
	}
	fab := func(dev, fabric, island string, bw int64, root string, n *int64) GPU {
		return GPU{Device: dev, Fabric: fabric, Island: island, BandwidthGBps: bw, PCIeRoot: root, NUMANode: n}
	}
	for _, tc := range []struct {
		name string
		a, b GPU
		want string
	}{
		{"self", pcie("gpu-0", "pci0000:00", numa(0)), pcie("gpu-0", "pci0000:00", numa(0)), "X"},
		{"nvswitch H100 450GB/s", fab("gpu-0", "nvswitch", "i", 450, "r0", numa(0)), fab("gpu-1", "nvswitch", "i", 450, "r1", numa(1)), "NV18"},
		{"nvlink A100 300GB/s", fab("gpu-0", "nvlink", "i", 300, "r0", numa(0)), fab("gpu-1", "nvlink", "i", 300, "r0", numa(0)), "NV12"},
		{"nvlink rounds", fab("gpu-0", "nvlink", "i", 112, "", nil), fab("gpu-1", "nvlink", "i", 112, "", nil), "NV4"},
		{"nvlink takes the smaller bandwidth", fab("gpu-0", "nvlink", "i", 600, "", nil), fab("gpu-1", "nvlink", "i", 300, "", nil), "NV12"},
		{"nvlink without bandwidth", fab("gpu-0", "nvlink", "i", 0, "", nil), fab("gpu-1", "nvlink", "i", 0, "", nil), "NV"},
		{"nvlink below one link", fab("gpu-0", "nvlink", "i", 10, "", nil), fab("gpu-1", "nvlink", "i", 10, "", nil), "NV"},
		{"xgmi", fab("gpu-0", "xgmi", "x", 448, "r0", numa(0)), fab("gpu-1", "xgmi", "x", 448, "r1", numa(1)), "XGMI"},
		{"nvlink, other island: PCIe decides", fab("gpu-0", "nvlink", "a", 300, "r0", numa(0)), fab("gpu-2", "nvlink", "b", 300, "r1", numa(1)), "SYS"},
		{"fabrics differ on one island id: PCIe decides", fab("gpu-0", "nvlink", "i", 300, "r0", numa(0)), fab("gpu-1", "xgmi", "i", 300, "r0", numa(0)), "PHB"},
		{"pcie island is no fabric", fab("gpu-0", "pcie", "p", 0, "r0", numa(0)), fab("gpu-1", "pcie", "p", 0, "r1", numa(0)), "NODE"},
		{"same root", pcie("gpu-0", "pci0000:00", numa(0)), pcie("gpu-1", "pci0000:00", numa(0)), "PHB"},
		{"same root, no numa", pcie("gpu-0", "pci0000:00", nil), pcie("gpu-1", "pci0000:00", nil), "PHB"},
		{"other root, same numa", pcie("gpu-0", "pci0000:00", numa(0)), pcie("gpu-1", "pci0000:40", numa(0)), "NODE"},
		{"other numa", pcie("gpu-0", "pci0000:00", numa(0)), pcie("gpu-1", "pci0000:80", numa(1)), "SYS"},
		{"other numa, no roots", pcie("gpu-0", "", numa(0)), pcie("gpu-1", "", numa(1)), "SYS"},
		{"same numa, a root missing", pcie("gpu-0", "", numa(0)), pcie("gpu-1", "pci0000:00", numa(0)), "?"},
		{"nothing published", pcie("gpu-0", "", nil), pcie("gpu-1", "", nil), "?"},
		{"roots differ, numa missing", pcie("gpu-0", "pci0000:00", nil), pcie("gpu-1", "pci0000:80", nil), "?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Link(tc.a, tc.b); got != tc.want {
				t.Errorf("Link = %q, want %q", got, tc.want)
			}
			if got := Link(tc.b, tc.a); got != tc.want {
				t.Errorf("Link reversed = %q, want %q (must be symmetric)", got, tc.want)
			}
		})
	}
}

func TestBuildTopologyErrors(t *testing.T) {
	s := inspecttest.Load(t, "dgx-h100.yaml")
	_, err := Build(s, "nope")
	if err == nil || !strings.Contains(err.Error(), "node nope") || !strings.Contains(err.Error(), "dgx-h100-0") {
		t.Errorf("unknown node: err = %v, want one naming the node and the nodes there are", err)
	}
}
