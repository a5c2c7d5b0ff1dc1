package claims

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/gpuvendor/vendors"
	"github.com/tessera-gpu/tessera/internal/vfio"
)

// sweep gives back, at start, what a passthrough cut short left that no
// claim records (its checkpoint lost with its spec): a function of a GPU's
// slot whose driver_override says vfio-pci and that no driver holds. No
// one can use such a function; the kernel's probe gives it its default
// driver. A GPU function vfio-pci holds that no claim records is someone
// else's (an operator's VM outside Kubernetes): it is logged and left. A
// node whose sysfs cannot be listed is logged too: the agent must start.
func (passthrough) sweep(ctx context.Context, m *Manager, occ occasion) (int, error) {
	if occ != atStart || m.cfg.VFIO == nil {
		return 0, nil
	}
	logger := klog.FromContext(ctx)
	fns, err := vfio.List(m.cfg.VFIO)
	if err != nil {
		logger.Error(err, "List PCI functions for passthroughs cut short")
		return 0, nil
	}
	recorded := map[string]bool{}
	for _, c := range m.cp.Claims {
		for _, d := range c.Devices {
			if d.VFIO != nil {
				for _, f := range d.VFIO.Functions {
					recorded[f.Address] = true
				}
			}
		}
	}
	gpuSlots := map[string]bool{}
	ids := map[string]bool{}
	for _, v := range vendors.All() {
		if id := v.Capabilities().PCIVendorID; id != "" {
			ids[id] = true
		}
	}
	for _, f := range fns {
		if f.Display() && ids[f.Vendor] {
			gpuSlots[vfio.Slot(f.Address)] = true
		}
	}
	for _, f := range fns {
		if recorded[f.Address] || f.Override != vfio.Driver || !gpuSlots[vfio.Slot(f.Address)] {
			continue
		}
		switch f.Driver {
		case "":
			if err := vfio.Restore(m.cfg.VFIO, f.Address, vfio.AnyDriver, nil); err != nil {
				logger.Error(err, "Give back a GPU function a passthrough cut short left on no driver", "pciBusID", f.Address)
				continue
			}
			drv, _ := vfio.DriverOf(m.cfg.VFIO, f.Address)
			logger.Info("Gave back a GPU function a passthrough cut short left on no driver", "pciBusID", f.Address, "driver", drv)
		case vfio.Driver:
			logger.Info("GPU function bound to vfio-pci that no claim holds: left as it is (passed through outside Tessera?)", "pciBusID", f.Address)
		}
	}
	return 0, nil
}
