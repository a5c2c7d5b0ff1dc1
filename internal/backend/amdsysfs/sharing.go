package amdsysfs

import (
	"context"
	"fmt"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/mps"
)

// AMD GPUs time-slice between processes natively, at an interval the driver
// fixes: the default is accepted and changes nothing, anything else is
// refused. ROCm has no counterpart of NVIDIA's MPS.

// SetTimeSlice implements backend.Sharer.
func (b *Backend) SetTimeSlice(_ context.Context, gpuUUID string, ts backend.TimeSlice) error {
	if ts == backend.TimeSliceDefault {
		return nil
	}
	return fmt.Errorf("GPU %s: time-slice interval %s: %w (AMD GPUs time-slice at a fixed interval)", gpuUUID, ts, backend.ErrSharingNotSupported)
}

// StartMPS implements backend.Sharer: AMD GPUs have no MPS.
func (b *Backend) StartMPS(_ context.Context, spec mps.DaemonSpec) (*mps.Daemon, error) {
	return nil, fmt.Errorf("MPS for %v: %w (MPS is NVIDIA's; AMD GPUs share by time-slicing)", spec.Devices, backend.ErrSharingNotSupported)
}

// StopMPS implements backend.Sharer: there is never a daemon to stop.
func (b *Backend) StopMPS(context.Context, string) error { return nil }

// EnsureMPSNamespace implements backend.Sharer: AMD GPUs have no MPS.
func (b *Backend) EnsureMPSNamespace(_ context.Context, daemonID string, _ mps.NamespaceSpec) (string, error) {
	return "", fmt.Errorf("amd: MPS daemon %s: MPS: %w", daemonID, backend.ErrSharingNotSupported)
}

// DeleteMPSNamespace implements backend.Sharer: there is never one.
func (b *Backend) DeleteMPSNamespace(context.Context, string, string) error { return nil }

// MPSDaemons implements backend.Sharer: none.
func (b *Backend) MPSDaemons(context.Context) ([]mps.DaemonState, error) { return nil, nil }
