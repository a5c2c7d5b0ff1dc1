package nvml

import (
	"os"
	"path/filepath"
	"testing"
)

func TestModelFromProductName(t *testing.T) {
	for name, want := range map[string]string{
		"NVIDIA H100 80GB HBM3":      "H100",
		"NVIDIA A100-SXM4-40GB":      "A100",
		"Mock NVIDIA A100-SXM4-40GB": "A100", // go-nvml's dgxa100 mock
		"NVIDIA A100-PCIE-40GB":      "A100",
		"Tesla T4":                   "T4",
		"NVIDIA L4":                  "L4",
		"NVIDIA H200":                "H200",
		"NVIDIA H200 141GB HBM3e":    "H200",
		"NVIDIA A30-PCIE-24GB":       "A30",
		"NVIDIA A10":                 "A10",
		"NVIDIA GH200 480GB":         "GH200",
		"Tesla V100-SXM2-16GB":       "V100",
		"NVIDIA B200 180GB HBM3e":    "B200",
		"NVIDIA Z9000 Future":        "Z9000", // unknown: first non-vendor token
	} {
		if got := modelFromProductName(name); got != want {
			t.Errorf("%q: %q, want %q", name, got, want)
		}
	}
}

func TestNormalizeBusID(t *testing.T) {
	for in, want := range map[string]string{
		"00000000:18:00.0": "0000:18:00.0",
		"00000000:DB:00.0": "0000:db:00.0",
		"0001:0A:1F.7":     "0001:0a:1f.7",
	} {
		if got, err := normalizeBusID(in); err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "18:00.0", "0000:zz:00.0", "0000:18:00.9"} {
		if _, err := normalizeBusID(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Profile names against nvidia-smi's, with the instance and GPU memory
// sizes of real GPUs (MiB): H100 80GB per the sim catalogue's -lgip
// capture, A100 40GB (40536 MiB total), H200 (143771 MiB total).
func TestMIGProfileNames(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		id         int
		slices     uint32
		mem, total uint64
		want       string
	}{
		{0, 1, 9984, 81559, "1g.10gb"},
		{7, 1, 9984, 81559, "1g.10gb+me"},
		{9, 1, 20096, 81559, "1g.20gb"},
		{1, 2, 20096, 81559, "2g.20gb"},
		{2, 3, 40448, 81559, "3g.40gb"},
		{3, 4, 40448, 81559, "4g.40gb"},
		{4, 7, 81152, 81559, "7g.80gb"},
		{0, 1, 4864, 40536, "1g.5gb"},
		{1, 2, 9856, 40536, "2g.10gb"},
		{2, 3, 19968, 40536, "3g.20gb"},
		{4, 7, 40192, 40536, "7g.40gb"},
		{0, 1, 16384, 143771, "1g.18gb"},
		{9, 1, 32768, 143771, "1g.35gb"},
		{4, 7, 143360, 143771, "7g.141gb"},
		{13, 1, 9984, 81559, "1g.10gb-me"},
	} {
		if got := migProfileName(c.id, c.slices, c.mem, c.total*mib); got != c.want {
			t.Errorf("profile %d, %d MiB of %d: %q, want %q", c.id, c.mem, c.total, got, c.want)
		}
	}
	if got := migDeviceProfileName("3g.40gb", 3, 1); got != "1c.3g.40gb" {
		t.Errorf("CI name %q", got)
	}
}

func TestVersions(t *testing.T) {
	if got := driverSemver("580.65.06"); got != "580.65.6" {
		t.Errorf("driver %q", got)
	}
	if got := driverSemver("550.54"); got != "550.54.0" {
		t.Errorf("driver %q", got)
	}
	if got := cudaDriverVersion(12040); got != "12.4" {
		t.Errorf("cuda %q", got)
	}
}

func TestSysfsMissing(t *testing.T) {
	s := sysfs{root: t.TempDir()}
	if _, _, err := s.pcieChain("0000:18:00.0"); err == nil {
		t.Error("pcie root of a missing device")
	}
	if n, err := s.numaNode("0000:18:00.0"); n != -1 || err != nil {
		t.Errorf("numa of a missing device: %d %v, want -1", n, err)
	}
	dir := filepath.Join(s.root, "sys", "bus", "pci", "devices")
	if err := os.MkdirAll(filepath.Join(s.root, "sys", "devices", "pci0000:00", "0000:00:1e.0"), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.MkdirAll(dir, 0o755)
	_ = os.WriteFile(filepath.Join(s.root, "sys", "devices", "pci0000:00", "0000:00:1e.0", "numa_node"), []byte("-1\n"), 0o644)
	if err := os.Symlink("../../../devices/pci0000:00/0000:00:1e.0", filepath.Join(dir, "0000:00:1e.0")); err != nil {
		t.Fatal(err)
	}
	if r, br, err := s.pcieChain("0000:00:1e.0"); r != "pci0000:00" || br != nil || err != nil {
		t.Errorf("root %q %v", r, err)
	}
	if n, _ := s.numaNode("0000:00:1e.0"); n != -1 {
		t.Errorf("numa %d, want -1", n)
	}
}
