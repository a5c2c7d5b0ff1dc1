package publish

import (
	"fmt"

	"github.com/tessera-gpu/tessera/internal/fabric"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/pci"
)

// PassedGPU is a GPU a claim passed through to a virtual machine
// (docs/vfio.md): vfio-pci holds it, not its host driver, so the backend
// cannot read it and usually no longer lists it.
type PassedGPU struct {
	UUID, PCIBusID string
	Vendor         inventory.Vendor
	// Seen is the GPU as it was last discovered, when the caller knows it
	// (the agent did before it passed it); nil after a restart.
	Seen *inventory.GPU
}

// withPassed is n with every passed GPU in it: one Discover still lists is
// marked, one it does not is put back (as last seen, or with what passed
// knows), so that it keeps its place in the gpu-<n> order: without it every
// GPU after it would be renamed. n itself is not changed; passed reports,
// by index into the result, which GPUs are passed.
func withPassed(n *inventory.Node, passed []PassedGPU) (out *inventory.Node, isPassed map[int]bool) {
	if len(passed) == 0 {
		return n, nil
	}
	isPassed = map[int]bool{}
	out = n
	for _, p := range passed {
		bdf, err := pci.Normalize(p.PCIBusID)
		if err != nil {
			bdf = p.PCIBusID
		}
		found := -1
		for i := range out.GPUs {
			g := &out.GPUs[i]
			if g.UUID == p.UUID || (bdf != "" && g.PCIBusID == bdf) {
				found = i
				break
			}
		}
		if found < 0 {
			if out == n {
				out = n.Clone()
			}
			out.GPUs = append(out.GPUs, placeholder(p, bdf))
			found = len(out.GPUs) - 1
		}
		isPassed[found] = true
	}
	return out, isPassed
}

// placeholder is what stands for a passed GPU the backend no longer lists.
func placeholder(p PassedGPU, bdf string) inventory.GPU {
	if p.Seen != nil {
		g := p.Seen.Clone()
		g.Partitions = nil
		return g
	}
	return inventory.GPU{Vendor: p.Vendor, UUID: p.UUID, PCIBusID: bdf, NUMANode: -1,
		Health: inventory.Health{State: inventory.Unknown}}
}

// pass records the passed GPU g as device name: no device, its counter set
// and partitions neither (it has none: passthrough refuses a GPU with
// partitions), only the entry its claim resolves, with the attributes it
// would be published with.
func (res *Result) pass(name string, g *inventory.GPU, f fabric.Attrs) error {
	d, err := wholeGPUDevice(name, g, f)
	if err != nil {
		return fmt.Errorf("passed GPU %s (%s): %w", name, g.PCIBusID, err)
	}
	if res.Passed == nil {
		res.Passed = map[string]Entry{}
	}
	res.Passed[name] = Entry{Name: name, GPU: g, Attributes: d.Attributes}
	return nil
}
