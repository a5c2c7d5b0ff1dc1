package amd

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tessera-gpu/tessera/internal/gpuvendor"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// Collective is RCCL's reading of the topology file, NCCL's shape with
// version 2 and xGMI links (docs/training.md).
func (Vendor) Collective() gpuvendor.Collective { return rccl{} }

type rccl struct{}

func (rccl) Library() string              { return "RCCL" }
func (rccl) SystemVersion() string        { return "2" }
func (rccl) LinkTag() string              { return "xgmi" }
func (rccl) PeerLink() inventory.LinkKind { return inventory.LinkXGMI }

// LinkGBps: an xGMI link carries 50 GB/s each way on CDNA2, 64 on CDNA3.
func (rccl) LinkGBps(g *inventory.GPU) int64 {
	if g.Architecture == "cdna3" {
		return 64
	}
	return 50
}

// GPUAttrs: RCCL reads sm as the compute unit count, and gcn, the LLVM
// target.
func (rccl) GPUAttrs(g *inventory.GPU) ([][2]string, error) {
	if g.ComputeUnits <= 0 {
		return nil, fmt.Errorf("GPU %s: no compute unit count", g.PCIBusID)
	}
	gcn, err := gcnName(g)
	if err != nil {
		return nil, err
	}
	return [][2]string{{"sm", strconv.FormatInt(g.ComputeUnits, 10)}, {"gcn", gcn}}, nil
}

// PCIClass: an MI300X is a processing accelerator, earlier Instinct cards
// display controllers.
func (rccl) PCIClass(g *inventory.GPU) string {
	if g.Architecture == "cdna3" {
		return "0x120000"
	}
	return "0x038000"
}

// gcnName is the LLVM target of g's gfx version: 9.4.2 is gfx942, 9.0.10
// gfx90a.
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
