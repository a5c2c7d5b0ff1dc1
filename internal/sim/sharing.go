package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/gpuvendor/nvidia"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/isolation"
	"github.com/tessera-gpu/tessera/internal/mps"
)

// Sharing as the hardware does it: an NVIDIA GPU keeps the time-slice
// interval it was given (in state.json, until a reboot, like the driver's
// compute policy) and Discover shows it; an AMD GPU time-slices at a fixed
// interval and has no MPS, exactly as internal/backend/amdsysfs says. MPS control
// daemons are real processes run by internal/mps (WithMPS), normally the
// stand-in `tessera-sim mps-control`.

// errNoMPS: the backend was started without WithMPS.
var errNoMPS = errors.New("sim: MPS control daemons are not configured (the backend needs sim.WithMPS)")

// SetTimeSlice implements backend.Sharer for whole GPUs of this node.
func (b *Backend) SetTimeSlice(ctx context.Context, gpuUUID string, ts backend.TimeSlice) error {
	if ts < backend.TimeSliceDefault || ts > backend.TimeSliceLong {
		return fmt.Errorf("sim: GPU %s: time-slice interval %s is not one of Default, Short, Medium, Long", gpuUUID, ts)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	g, err := b.gpu(gpuUUID)
	if err != nil {
		if owner := b.partitionOwner(gpuUUID); owner != nil {
			return fmt.Errorf("sim: %s is a partition of GPU %s: time-slice intervals are set on whole GPUs", gpuUUID, owner.UUID)
		}
		return err
	}
	if err := b.reachable(g); err != nil {
		return err
	}
	v, err := vendorOf(g)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	if !v.Capabilities().TimeSliceIntervals {
		if ts == backend.TimeSliceDefault {
			return nil
		}
		return fmt.Errorf("sim: GPU %s: time-slice interval %s: %w (%s GPUs time-slice at a fixed interval)", gpuUUID, ts, backend.ErrSharingNotSupported, v.DisplayName())
	}
	name := ""
	if ts != backend.TimeSliceDefault {
		name = ts.String()
	}
	if g.TimeSlice == name {
		return nil
	}
	before := g.TimeSlice
	g.TimeSlice = name
	if err := b.save(); err != nil {
		g.TimeSlice = before
		return fmt.Errorf("sim: GPU %s: setting time-slice interval %s: %w", gpuUUID, ts, err)
	}
	klog.FromContext(ctx).V(2).Info("Set time-slice interval", "gpu", gpuUUID, "interval", ts)
	return nil
}

// TimeSlice returns the time-slice interval of the GPU with gpuUUID (sim
// only: tests check what SetTimeSlice left).
func (b *Backend) TimeSlice(gpuUUID string) (backend.TimeSlice, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	g, err := b.gpu(gpuUUID)
	if err != nil {
		return 0, err
	}
	if g.TimeSlice == "" {
		return backend.TimeSliceDefault, nil
	}
	return parseTimeSlice(g.TimeSlice)
}

// parseTimeSlice is the inverse of backend.TimeSlice.String.
func parseTimeSlice(name string) (backend.TimeSlice, error) {
	for ts := backend.TimeSliceDefault; ts <= backend.TimeSliceLong; ts++ {
		if ts.String() == name {
			return ts, nil
		}
	}
	return 0, fmt.Errorf("unknown time-slice interval %q", name)
}

// StartMPS implements backend.Sharer: every device must be an NVIDIA GPU or
// partition of this node; the daemon is internal/mps's.
func (b *Backend) StartMPS(ctx context.Context, spec mps.DaemonSpec) (*mps.Daemon, error) {
	if err := b.checkMPSDevices(spec); err != nil {
		return nil, err
	}
	if b.mps == nil {
		return nil, errNoMPS
	}
	d, err := b.mps.Start(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	return d, nil
}

// StopMPS implements backend.Sharer. Without WithMPS no daemon can exist,
// so there is none to stop.
func (b *Backend) StopMPS(ctx context.Context, id string) error {
	if b.mps == nil {
		return nil
	}
	if err := b.mps.Stop(ctx, id); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	return nil
}

// EnsureMPSNamespace implements backend.Sharer.
func (b *Backend) EnsureMPSNamespace(ctx context.Context, daemonID string, ns mps.NamespaceSpec) (string, error) {
	if b.mps == nil {
		return "", errNoMPS
	}
	dir, err := b.mps.EnsureNamespace(ctx, daemonID, ns)
	if err != nil {
		return "", fmt.Errorf("sim: %w", err)
	}
	return dir, nil
}

// DeleteMPSNamespace implements backend.Sharer.
func (b *Backend) DeleteMPSNamespace(ctx context.Context, daemonID, name string) error {
	if b.mps == nil {
		return nil
	}
	if err := b.mps.DeleteNamespace(ctx, daemonID, name); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	return nil
}

// MPSDaemons implements backend.Sharer; none without WithMPS.
func (b *Backend) MPSDaemons(ctx context.Context) ([]mps.DaemonState, error) {
	if b.mps == nil {
		return nil, nil
	}
	ds, err := b.mps.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	return ds, nil
}

// checkMPSDevices checks that the daemon's devices are GPUs or partitions
// of this node whose vendor has MPS.
func (b *Backend) checkMPSDevices(spec mps.DaemonSpec) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, uuid := range spec.Devices {
		g, err := b.gpu(uuid)
		if err != nil {
			if g = b.partitionOwner(uuid); g == nil {
				return fmt.Errorf("sim: MPS daemon %s: no GPU or partition %s on this node", spec.ID, uuid)
			}
		}
		if err := b.reachable(g); err != nil {
			return fmt.Errorf("sim: MPS daemon %s: %w", spec.ID, err)
		}
		v, err := vendorOf(g)
		if err != nil {
			return fmt.Errorf("sim: MPS daemon %s: %w", spec.ID, err)
		}
		if !v.Capabilities().MPS {
			return fmt.Errorf("sim: MPS daemon %s on %s (%s): %w (MPS is NVIDIA's; %s GPUs share by time-slicing)", spec.ID, uuid, g.ProductName, backend.ErrSharingNotSupported, v.DisplayName())
		}
	}
	return nil
}

// partitionOwner returns the GPU that has a partition with uuid, or nil;
// the caller holds mu.
func (b *Backend) partitionOwner(uuid string) *inventory.GPU {
	for i := range b.node.GPUs {
		g := &b.node.GPUs[i]
		if slices.ContainsFunc(g.Partitions, func(p inventory.Partition) bool { return p.UUID == uuid }) {
			return g
		}
	}
	return nil
}

// mpsProtocol is the MPS the node's NVIDIA driver runs: v3 from r615, by
// the test the published mpsNamespace attribute uses.
func mpsProtocol(n *inventory.Node) int {
	caps := nvidia.Vendor{}.Capabilities()
	for i := range n.GPUs {
		if g := &n.GPUs[i]; g.Vendor == inventory.VendorNVIDIA && isolation.MPSNamespaces(caps, g) {
			return mps.Protocol3
		}
	}
	return 0
}
