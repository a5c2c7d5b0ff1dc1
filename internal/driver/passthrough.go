package driver

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/vfio"
)

// Passthrough's part in publishing (docs/vfio.md): the GPUs claims passed
// through publish no device and keep their names (publish.Options.Passed),
// each as the agent last saw it on its driver where it did (the backend
// no longer lists it), and, with --passthrough, the GPUs whose IOMMU group
// can be passed carry iommuGroup (publish.Options.IOMMUGroup).

// PassedThroughMessage is what the kubelet's health stream and the pod's
// status say of a passed GPU's health: no one on the host can read it.
const PassedThroughMessage = "passed through to a virtual machine: vfio-pci holds it and its host driver cannot read its health"

// setPassed gives later builds the GPUs claims pass through.
func (p *publisher) setPassed(passed func() []publish.PassedGPU) {
	p.mu.Lock()
	p.passed = passed
	p.mu.Unlock()
}

// observe remembers each discovered GPU by bus ID, for a passed GPU's
// place once the backend no longer lists it, and with --passthrough reads
// which can be passed, saying once which cannot and why.
func (p *publisher) observe(ctx context.Context, inv *inventory.Node) {
	if p.seen == nil {
		p.seen = map[string]inventory.GPU{}
	}
	addrs := make([]string, 0, len(inv.GPUs))
	for i := range inv.GPUs {
		g := &inv.GPUs[i]
		p.seen[g.PCIBusID] = g.Clone()
		addrs = append(addrs, g.PCIBusID)
	}
	if !p.opts.Passthrough || p.opts.VFIO == nil {
		return
	}
	groups, why, err := vfio.Passable(p.opts.VFIO, addrs)
	said := fmt.Sprint(err, why)
	if said != p.passableSaid {
		p.passableSaid = said
		logger := klog.FromContext(ctx)
		if err != nil {
			logger.Error(err, "No GPU of this node can be passed through")
		}
		for _, a := range slices.Sorted(maps.Keys(why)) {
			logger.Info("GPU cannot be passed through; it is not published with iommuGroup", "pciBusID", a, "reason", why[a])
		}
	}
	p.groups = groups
}

// passedNow are the GPUs claims pass through, each with the GPU as last
// seen; the runner of publishes calls it.
func (p *publisher) passedNow(passed func() []publish.PassedGPU) []publish.PassedGPU {
	if passed == nil {
		return nil
	}
	out := passed()
	for i := range out {
		if g, ok := p.seen[out[i].PCIBusID]; ok {
			out[i].Seen, out[i].Vendor = &g, g.Vendor
		}
	}
	return out
}

// iommuGroup is publish.Options.IOMMUGroup from what observe read.
func (p *publisher) iommuGroup(g *inventory.GPU) (int, bool) {
	n, ok := p.groups[g.PCIBusID]
	return n, ok
}

// followPassthrough republishes after a prepare or unprepare that passed
// a GPU through or gave one back: the node's inventory changed (the
// backend lists the GPU no more, or again) and its devices with it. It
// looks at a counter, not the claims' state: a call that passed nothing
// must not wait for the state lock another claim's prepare holds.
func (d *Driver) followPassthrough(ctx context.Context) {
	n := d.claims.PassthroughChanges()
	if d.passSeen.Swap(n) == n {
		return
	}
	if err := d.pub.publish(ctx, inventoryChanged); err != nil {
		klog.FromContext(ctx).Error(err, "Republish after a GPU was passed through or given back")
	}
}
