//go:build cgo && linux

package nvml

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/mps"
)

// Sharing settings. NVML has no public call for the compute time-slice, so
// SetTimeSlice runs `nvidia-smi compute-policy`, as NVIDIA's own DRA driver
// does. MPS daemons are internal/mps's, with nvidia-cuda-mps-control.

// Defaults of the sharing Options.
const (
	defaultNvidiaSMI = "nvidia-smi"
	defaultMPSRoot   = "/var/run/tessera/mps"
	// smiTimeout bounds one nvidia-smi run: a wedged driver must not hang
	// a prepare forever.
	smiTimeout = 30 * time.Second
)

var defaultMPSControl = []string{"nvidia-cuda-mps-control"}

// SetTimeSlice implements backend.Sharer: `nvidia-smi compute-policy -i
// <uuid> --set-timeslice=<n>`, n the interval's number (0 the default).
func (b *Backend) SetTimeSlice(ctx context.Context, gpuUUID string, ts backend.TimeSlice) error {
	if ts < backend.TimeSliceDefault || ts > backend.TimeSliceLong {
		return fmt.Errorf("nvml: GPU %s: time-slice interval %s is not one of Default, Short, Medium, Long", gpuUUID, ts)
	}
	if err := b.checkWholeGPU(gpuUUID); err != nil {
		return fmt.Errorf("nvml: set time-slice interval %s on GPU %s: %w", ts, gpuUUID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, smiTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.smi, "compute-policy", "-i", gpuUUID, fmt.Sprintf("--set-timeslice=%d", int(ts)))
	out, err := cmd.CombinedOutput()
	text := strings.TrimSpace(string(out))
	if err != nil {
		if text != "" {
			err = fmt.Errorf("%w: %s", err, text)
		}
		return fmt.Errorf("nvml: set time-slice interval %s on GPU %s: %s: %w", ts, gpuUUID, strings.Join(cmd.Args, " "), err)
	}
	klog.FromContext(ctx).V(2).Info("Set time-slice interval", "backend", "nvml", "gpu", gpuUUID, "interval", ts, "output", text)
	return nil
}

// checkWholeGPU checks that uuid is a whole GPU of this node: the compute
// policy is per GPU, a MIG device has none of its own.
func (b *Backend) checkWholeGPU(uuid string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errors.New("backend is closed")
	}
	b.refreshHandles()
	for _, h := range b.handles {
		if h == nil {
			continue
		}
		if got, ret := h.GetUUID(); ret == nvml.SUCCESS && got == uuid {
			return nil
		}
	}
	if strings.HasPrefix(uuid, "MIG-") {
		return errors.New("it is a MIG device: time-slice intervals are set on whole GPUs")
	}
	return errUnknownGPU
}

// StartMPS implements backend.Sharer: every device must be a GPU or MIG
// device of this node, as the daemon would otherwise start and fail only
// its clients.
func (b *Backend) StartMPS(ctx context.Context, spec mps.DaemonSpec) (*mps.Daemon, error) {
	if err := b.checkDevices(spec.Devices); err != nil {
		return nil, fmt.Errorf("nvml: MPS daemon %s: %w", spec.ID, err)
	}
	d, err := b.mps.Start(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("nvml: %w", err)
	}
	return d, nil
}

// StopMPS implements backend.Sharer.
func (b *Backend) StopMPS(ctx context.Context, id string) error {
	if err := b.mps.Stop(ctx, id); err != nil {
		return fmt.Errorf("nvml: %w", err)
	}
	return nil
}

// EnsureMPSNamespace implements backend.Sharer.
func (b *Backend) EnsureMPSNamespace(ctx context.Context, daemonID string, ns mps.NamespaceSpec) (string, error) {
	dir, err := b.mps.EnsureNamespace(ctx, daemonID, ns)
	if err != nil {
		return "", fmt.Errorf("nvml: %w", err)
	}
	return dir, nil
}

// DeleteMPSNamespace implements backend.Sharer.
func (b *Backend) DeleteMPSNamespace(ctx context.Context, daemonID, name string) error {
	if err := b.mps.DeleteNamespace(ctx, daemonID, name); err != nil {
		return fmt.Errorf("nvml: %w", err)
	}
	return nil
}

// MPSDaemons implements backend.Sharer.
func (b *Backend) MPSDaemons(ctx context.Context) ([]mps.DaemonState, error) {
	ds, err := b.mps.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("nvml: %w", err)
	}
	return ds, nil
}

// checkDevices checks that every UUID is a GPU or a MIG device NVML knows.
func (b *Backend) checkDevices(uuids []string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errors.New("backend is closed")
	}
	b.refreshHandles()
	known := map[string]bool{}
	for _, h := range b.handles {
		if h == nil {
			continue
		}
		if u, ret := h.GetUUID(); ret == nvml.SUCCESS {
			known[u] = true
		}
		// A GPU without MIG, or one whose MIG devices cannot be read, has
		// none to offer: a UUID only found there is reported unknown.
		_ = eachMIGDevice(h, func(_ int, d nvml.Device) error {
			if u, ret := d.GetUUID(); ret == nvml.SUCCESS {
				known[u] = true
			}
			return nil
		})
	}
	for _, u := range uuids {
		if !known[u] {
			return fmt.Errorf("no GPU or MIG device %s on this node", u)
		}
	}
	return nil
}
