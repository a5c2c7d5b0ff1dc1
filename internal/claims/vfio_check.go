package claims

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/gpuvendor/vendors"
	"github.com/tessera-gpu/tessera/internal/vfio"
)

// checkPassthrough refuses, before anything is done, the devices of the
// vfio class that cannot be passed through, each naming the device and
// why; for the others it reads what passing them moves into their
// dev.VFIO (plan records it). m.mu is held.
func (m *Manager) checkPassthrough(ctx context.Context, devs []planned) error {
	var idx []int
	var errs []string
	for i := range devs {
		if !devs[i].passthrough {
			continue
		}
		if err := m.passable(&devs[i]); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		idx = append(idx, i)
	}
	if len(errs) > 0 {
		return withKind(ErrPassthrough, errors.New(strings.Join(errs, "; ")))
	}
	if len(idx) == 0 {
		return nil
	}
	gpus := make([]string, len(idx))
	for k, i := range idx {
		gpus[k] = devs[i].dev.GPU.PCIBusID
	}
	plans, err := vfio.Plan(m.cfg.VFIO, gpus)
	if err != nil {
		klog.FromContext(ctx).Info("Refusing passthrough", "devices", deviceNames(devs, idx), "err", err)
		return withKind(ErrPassthrough, fmt.Errorf("device(s) %s cannot be passed through: %w", strings.Join(deviceNames(devs, idx), ", "), err))
	}
	for k, i := range idx {
		d := &devs[i]
		p := plans[k]
		host := vendors.Capabilities(d.dev.GPU.Vendor).HostDriver
		if drv := p.Functions[0].Driver; drv != host {
			return withKind(ErrPassthrough, fmt.Errorf("device %s (%s) is bound to %s, not %s: the agent passes only a GPU its host driver holds, and gives it back there",
				d.dev.Device, p.Functions[0].Address, boundTo(drv), host))
		}
		v := &checkpoint.VFIO{Group: p.Group}
		for _, f := range p.Functions {
			v.Functions = append(v.Functions, checkpoint.VFIOFunction{Address: f.Address, Driver: f.Driver})
		}
		d.dev.VFIO = v
	}
	return nil
}

// passable says why d, allocated through the vfio class, cannot be passed
// through whatever the node's PCI side looks like; nil if it can.
func (m *Manager) passable(d *planned) error {
	name := d.dev.Device
	g := &d.dev.GPU
	caps := vendors.Capabilities(g.Vendor)
	switch {
	case !m.cfg.Passthrough:
		return fmt.Errorf("device %s: passthrough is off on this node (the agent's --passthrough, the chart's passthrough.enabled)", name)
	case m.cfg.VFIO == nil:
		return fmt.Errorf("device %s: the node's PCI sysfs is not known to the agent", name)
	case d.carve != nil || d.dev.Partition != nil:
		return fmt.Errorf("device %s is a partition: only a whole GPU can be passed through", name)
	case d.share != nil || d.dev.ShareID != "":
		return fmt.Errorf("device %s is a capacity share of its GPU (the node shares GPUs by capacity): passthrough needs the GPU whole, published unshared", name)
	case !caps.Passthrough || caps.HostDriver == "":
		return fmt.Errorf("device %s: %s GPUs cannot be passed through", name, g.Vendor)
	case len(g.Partitions) > 0:
		return fmt.Errorf("device %s: its GPU holds %d partition(s) (MIG instances in use): they would go with it", name, len(g.Partitions))
	case g.Partitioning != nil && g.Partitioning.Enabled && !m.dynamic(g):
		return fmt.Errorf("device %s: its GPU has %s mode on: a GPU in partition mode is not whole", name, g.Partitioning.Kind)
	case d.dev.Sharing != nil:
		return fmt.Errorf("device %s: its config asks sharing (%s), which a GPU passed to a virtual machine cannot have: it is the guest's alone", name, d.dev.Sharing.Strategy)
	case d.dev.NCCLTopoFile:
		return fmt.Errorf("device %s: its config asks an NCCL topology file, which a GPU passed to a virtual machine cannot have", name)
	case g.PCIBusID == "":
		return fmt.Errorf("device %s: its GPU's PCI bus ID is unknown", name)
	}
	return nil
}

func deviceNames(devs []planned, idx []int) []string {
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = fmt.Sprintf("%s (%s)", devs[i].dev.Device, devs[i].dev.GPU.PCIBusID)
	}
	return out
}

func boundTo(d string) string {
	if d == "" {
		return "no driver"
	}
	return d
}
