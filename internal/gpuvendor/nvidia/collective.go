package nvidia

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tessera-gpu/tessera/internal/gpuvendor"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// Collective is NCCL's reading of the topology file (docs/training.md).
func (Vendor) Collective() gpuvendor.Collective { return nccl{} }

type nccl struct{}

func (nccl) Library() string              { return "NCCL" }
func (nccl) SystemVersion() string        { return "1" }
func (nccl) LinkTag() string              { return "nvlink" }
func (nccl) PeerLink() inventory.LinkKind { return inventory.LinkNVLink }

// LinkGBps: NVLink 1 (Pascal) carries 20 GB/s a link each way, NVLink
// 2-4 (Volta to Hopper) 25, NVLink 5 (Blackwell) 50: 18 links make
// Blackwell's 900 GB/s each way.
func (nccl) LinkGBps(g *inventory.GPU) int64 {
	switch g.Architecture {
	case "pascal":
		return 20
	case "blackwell":
		return 50
	}
	return 25
}

// GPUAttrs: sm is the compute capability as major*10+minor (9.0 is 90).
func (nccl) GPUAttrs(g *inventory.GPU) ([][2]string, error) {
	maj, minor, ok := majorMinor(g.ComputeCapability)
	if !ok {
		return nil, fmt.Errorf("GPU %s: compute capability %q is not major.minor", g.PCIBusID, g.ComputeCapability)
	}
	return [][2]string{{"sm", strconv.Itoa(maj*10 + minor)}}, nil
}

// PCIClass: NVIDIA's data-centre GPUs are 3D controllers.
func (nccl) PCIClass(*inventory.GPU) string { return "0x030200" }

func majorMinor(v string) (int, int, bool) {
	parts := strings.Split(v, ".")
	if len(parts) < 2 {
		return 0, 0, false
	}
	maj, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || maj < 0 || minor < 0 || minor > 9 {
		return 0, 0, false
	}
	return maj, minor, true
}
