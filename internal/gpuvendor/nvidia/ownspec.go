package nvidia

import (
	"regexp"
	"strconv"

	"github.com/tessera-gpu/tessera/internal/gpuvendor"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// CDIKind is the kind of the node-wide spec nvidia-ctk generates
// (`nvidia-ctk cdi generate`, usually /etc/cdi or /var/run/cdi/nvidia.yaml).
const CDIKind = "nvidia.com/gpu"

// OwnSpec is nvidia-ctk's spec. Its devices are named by UUID, or by index
// ("0", "0:7"): those are matched by the nodes they carry, a whole GPU's
// one GPU node, a MIG device's GPU node and its GPU and compute instances'
// access nodes.
func (Vendor) OwnSpec() gpuvendor.OwnSpec { return ctkSpec{} }

type ctkSpec struct{}

var (
	ctkGPUNode = regexp.MustCompile(`^/dev/nvidia([0-9]+)$`)
	ctkCapNode = regexp.MustCompile(`^/dev/nvidia-caps/nvidia-cap([0-9]+)$`)
)

func (ctkSpec) Kind() string { return CDIKind }

func (ctkSpec) Key(nodes []string) (string, bool) {
	var gpus, caps []string
	for _, n := range nodes {
		if m := ctkGPUNode.FindStringSubmatch(n); m != nil {
			gpus = append(gpus, m[1])
		}
		if m := ctkCapNode.FindStringSubmatch(n); m != nil {
			caps = append(caps, m[1])
		}
	}
	switch {
	case len(gpus) == 1 && len(caps) == 0:
		return "gpu/" + gpus[0], true
	case len(gpus) == 1 && len(caps) == 2:
		return "mig/" + caps[0] + "/" + caps[1], true
	}
	return "", false
}

func (ctkSpec) DeviceKey(g *inventory.GPU, p *inventory.Partition) (string, bool) {
	if p == nil {
		return "gpu/" + strconv.Itoa(g.Minor), g.Minor >= 0
	}
	gi, ci, err := MIGCapMinors(g.Minor, p.GPUInstanceID, p.ComputeInstanceID)
	if err != nil {
		return "", false
	}
	return "mig/" + strconv.Itoa(gi) + "/" + strconv.Itoa(ci), true
}
