package nccltopo

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// The figures below are not in the inventory; they are derived from what
// is (architecture, compute capability, gfx version, link bandwidth) and
// are listed as derived in docs/training.md.

// pcieGen is the PCIe generation of a GPU's host link by architecture.
var pcieGen = map[string]int{
	"pascal": 3, "volta": 3, "turing": 3,
	"ampere": 4, "ada": 4, "hopper": 5, "blackwell": 5,
	"cdna": 4, "cdna2": 4, "cdna3": 5,
}

// linkSpeed is the link_speed value, as Linux writes max_link_speed, of a
// PCIe generation; an unknown architecture gets Gen4, NCCL's own guess
// when /sys says nothing being Gen3.
func linkSpeed(arch string) string {
	switch pcieGen[arch] {
	case 3:
		return "8.0 GT/s PCIe"
	case 5:
		return "32.0 GT/s PCIe"
	default:
		return "16.0 GT/s PCIe"
	}
}

// linkWidth of every GPU and switch link: x16, the width of every GPU in
// the catalogue.
const linkWidth = 16

// Per-link unidirectional bandwidth (GB/s): NVLink 1 20, NVLink 2-4 25;
// xGMI 50 (CDNA2) and 64 (CDNA3).
func perLinkGBps(kind inventory.LinkKind, g *inventory.GPU) int64 {
	switch kind {
	case inventory.LinkXGMI:
		if g.Architecture == "cdna3" {
			return 64
		}
		return 50
	default:
		if g.Architecture == "pascal" {
			return 20
		}
		return 25
	}
}

// linkCount is how many links of kind make up bw GB/s from g, at least one.
func linkCount(kind inventory.LinkKind, g *inventory.GPU, bw int64) int {
	n := int((bw + perLinkGBps(kind, g)/2) / perLinkGBps(kind, g))
	return max(n, 1)
}

// smValue is the gpu element's sm: NVIDIA's compute capability as
// major*10+minor (9.0 is 90); RCCL reads it as the compute unit count.
func smValue(g *inventory.GPU) (int, error) {
	if g.Vendor == inventory.VendorAMD {
		if g.ComputeUnits <= 0 {
			return 0, fmt.Errorf("GPU %s: no compute unit count", g.PCIBusID)
		}
		return int(g.ComputeUnits), nil
	}
	maj, min, ok := majorMinor(g.ComputeCapability)
	if !ok {
		return 0, fmt.Errorf("GPU %s: compute capability %q is not major.minor", g.PCIBusID, g.ComputeCapability)
	}
	return maj*10 + min, nil
}

// gcnName is RCCL's gcn attribute, the LLVM target: gfx version 9.4.2 is
// gfx942, 9.0.10 gfx90a.
func gcnName(g *inventory.GPU) (string, error) {
	parts := strings.Split(g.GFXVersion, ".")
	if len(parts) != 3 {
		return "", fmt.Errorf("GPU %s: gfx version %q is not major.minor.stepping", g.PCIBusID, g.GFXVersion)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 || (i > 0 && v > 15) {
			return "", fmt.Errorf("GPU %s: gfx version %q is not major.minor.stepping", g.PCIBusID, g.GFXVersion)
		}
		n[i] = v
	}
	return fmt.Sprintf("gfx%d%x%x", n[0], n[1], n[2]), nil
}

func majorMinor(v string) (int, int, bool) {
	parts := strings.Split(v, ".")
	if len(parts) < 2 {
		return 0, 0, false
	}
	maj, err1 := strconv.Atoi(parts[0])
	min, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || maj < 0 || min < 0 || min > 9 {
		return 0, 0, false
	}
	return maj, min, true
}

// gpuClass is the PCI class a GPU's pci element carries: NVIDIA data-centre
// GPUs are 3D controllers (0x030200), an MI300X a processing accelerator
// (0x120000), earlier Instinct cards display controllers (0x038000). NCCL
// reads the class from /sys over it where /sys has the device.
func gpuClass(g *inventory.GPU) string {
	switch {
	case g.Vendor == inventory.VendorAMD && g.Architecture == "cdna3":
		return "0x120000"
	case g.Vendor == inventory.VendorAMD:
		return "0x038000"
	default:
		return "0x030200"
	}
}
