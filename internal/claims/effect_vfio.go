package claims

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/cdi"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/vfio"
)

// passthrough is the VFIO passthrough effect (docs/vfio.md): a whole GPU
// allocated through the vfio class is handed to a virtual machine. check
// refuses what cannot be passed (vfio_check.go) and reads what passing it
// moves, plan records that (its IOMMU group and the functions of its slot,
// each with its driver) before anything is written, apply binds each
// function to vfio-pci through driver_override, and undo gives each back
// to the driver it was on. Every sysfs write is one that the next call
// recognises as done (internal/vfio), so rollback after a crash anywhere,
// even between unbind and bind, finishes the job. The kernel forgets all
// of it at a reboot: recovery then clears the record's Bound, and the
// kubelet's next prepare passes the GPU again (lostVFIO).
type passthrough struct{ nothing }

// plan records what check read: the entry is saved before the first
// write, so a crash finds every function to give back.
func (passthrough) plan(_ *Manager, d *planned, rec *checkpoint.Device) bool {
	if d.dev.VFIO == nil {
		return false
	}
	v := *d.dev.VFIO
	v.Functions = slices.Clone(v.Functions)
	rec.VFIO = &v
	return true
}

func (passthrough) holds(d checkpoint.Device) bool { return d.VFIO != nil }

func (passthrough) check(ctx context.Context, m *Manager, _ string, devs []planned) error {
	return m.checkPassthrough(ctx, devs)
}

// apply binds every function of each passed GPU to vfio-pci and checks
// that the group's node appeared, the one the spec names.
func (passthrough) apply(ctx context.Context, m *Manager, entry *checkpoint.Claim, devs []planned) error {
	for i := range devs {
		rec := entry.Devices[i].VFIO
		if rec == nil {
			continue
		}
		for _, f := range rec.Functions {
			if err := vfio.Bind(m.cfg.VFIO, f.Address, m.vfioStep); err != nil {
				if errors.Is(err, errInjected) {
					return err
				}
				return withKind(ErrPassthrough, fmt.Errorf("device %s: pass through: %w", devs[i].dev.Device, err))
			}
		}
		node := filepath.Join(m.cfg.Backend.DevRoot(), vfio.GroupNode(rec.Group))
		if _, err := os.Stat(node); err != nil {
			return withKind(ErrPassthrough, fmt.Errorf("device %s: bound to %s, but its IOMMU group's node is missing: %w", devs[i].dev.Device, vfio.Driver, err))
		}
		rec.Bound = true
		m.passChanges.Add(1)
		devs[i].dev.VFIO = rec
		klog.FromContext(ctx).V(2).Info("Passed GPU through", "device", devs[i].dev.Device, "pciBusID", rec.Functions[0].Address, "iommuGroup", rec.Group, "functions", len(rec.Functions))
	}
	return nil
}

// undo gives every function c passed back to the driver it was on, the
// GPU last.
func (passthrough) undo(ctx context.Context, m *Manager, c *checkpoint.Claim) error {
	for _, d := range c.Devices {
		if d.VFIO == nil {
			continue
		}
		fns := d.VFIO.Functions
		for k := len(fns) - 1; k >= 0; k-- {
			if err := vfio.Restore(m.cfg.VFIO, fns[k].Address, fns[k].Driver, m.vfioStep); err != nil {
				if errors.Is(err, errInjected) {
					return err
				}
				return withKind(ErrPassthrough, fmt.Errorf("device %s: give back to its driver: %w", d.Device, err))
			}
		}
		m.passChanges.Add(1)
		klog.FromContext(ctx).V(2).Info("Gave passed GPU back to its driver", "device", d.Device, "pciBusID", fns[0].Address, "driver", fns[0].Driver)
	}
	return nil
}

// ensure binds again, at start and when the kubelet prepares the claim
// again, a passed function found off vfio-pci (given back by hand): the
// claim's spec names its group's node.
func (passthrough) ensure(ctx context.Context, m *Manager, r *recorded, occ occasion) (int, error) {
	if occ == onWatch || occ == onSweep {
		return 0, nil
	}
	for _, d := range r.c.Devices {
		if d.VFIO == nil || !d.VFIO.Bound {
			continue
		}
		for _, f := range d.VFIO.Functions {
			drv, err := vfio.DriverOf(m.cfg.VFIO, f.Address)
			if err != nil {
				return 0, withKind(ErrPassthrough, fmt.Errorf("device %s: %w", d.Device, err))
			}
			if drv == vfio.Driver {
				continue
			}
			klog.FromContext(ctx).Info("Passed function found off vfio-pci; binding it again", "claim", klog.KRef(r.c.Namespace, r.c.Name), "device", d.Device, "pciBusID", f.Address, "driver", drv)
			if err := vfio.Bind(m.cfg.VFIO, f.Address, nil); err != nil {
				return 0, withKind(ErrPassthrough, fmt.Errorf("device %s: pass through again: %w", d.Device, err))
			}
		}
	}
	return 0, nil
}

// edits give each passed GPU its IOMMU group's node, and the claim the
// VFIO container node once.
func (passthrough) edits(_ *Manager, s *claimSpec) error {
	for i := range s.Devices {
		if v := s.Devices[i].VFIO; v != nil {
			s.Devices[i].Edits.Nodes = append(s.Devices[i].Edits.Nodes, vfio.GroupNode(v.Group))
		}
	}
	s.Shared = append(s.Shared, cdi.ClaimLevel{
		Name:  "vfio",
		Joins: func(d *cdi.ClaimDevice) bool { return d.VFIO != nil },
		Edits: func([]cdi.ClaimDevice) (cdi.Edits, error) { return cdi.Edits{Nodes: []string{vfio.ContainerNode}}, nil },
	})
	return nil
}

// vfioStep is the crash hook at each of internal/vfio's steps.
func (m *Manager) vfioStep(s vfio.Step) error { return m.crash(crashStep(s)) }

// lostVFIO reports whether a prepared claim's passthrough is gone:
// recovery clears Bound when the node rebooted. Such a claim is prepared
// again from scratch.
func lostVFIO(c *checkpoint.Claim) bool {
	for _, d := range c.Devices {
		if d.VFIO != nil && !d.VFIO.Bound {
			return true
		}
	}
	return false
}
