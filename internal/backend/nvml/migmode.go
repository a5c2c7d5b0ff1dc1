//go:build cgo && linux

package nvml

import (
	"context"
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"
)

// SetPartitionMode implements backend.Backend: it turns MIG mode on or off
// where that takes effect at once (Hopper and newer, no GPU instances).
//
// It never resets a GPU, and never asks NVML to: on A100-class GPUs
// nvmlDeviceSetMigMode may itself reset the GPU to apply the mode, which
// would kill whatever runs on it, so there the change is refused before
// NVML is called (the same rule Discover publishes as ModeChangeNeedsReset).
// If NVML still leaves the change pending (a GPU in use, or a platform that
// wants a reset), the pending change is set back and an error returned, so
// no later reset brings a mode nobody asked for.
func (b *Backend) SetPartitionMode(ctx context.Context, gpuUUID string, enabled bool) error {
	logger := klog.FromContext(ctx).WithValues("backend", "nvml", "gpu", gpuUUID, "enabled", enabled)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.changes++
	if err := b.setPartitionMode(ctx, logger, gpuUUID, enabled); err != nil {
		return fmt.Errorf("nvml: set MIG mode %s on GPU %s: %w", onOff(enabled), gpuUUID, err)
	}
	return nil
}

func onOff(enabled bool) string {
	if enabled {
		return "on"
	}
	return "off"
}

func migModeValue(enabled bool) int {
	if enabled {
		return nvml.DEVICE_MIG_ENABLE
	}
	return nvml.DEVICE_MIG_DISABLE
}

func (b *Backend) setPartitionMode(ctx context.Context, logger klog.Logger, gpuUUID string, enabled bool) error {
	r, err := b.migReader(ctx, gpuUUID)
	if err != nil {
		return err
	}
	pt, err := r.migMode()
	if err != nil {
		return err
	}
	if pt.Enabled == enabled {
		logger.V(4).Info("MIG mode already set")
		return nil
	}
	if pt.ModeChangeNeedsReset {
		arch := r.g.Architecture
		if arch == "" {
			arch = "unknown"
		}
		return fmt.Errorf("the change needs a GPU reset on this GPU (architecture %s), which the driver never does; "+
			"change it out of band (nvidia-smi -i %s -mig %d, then reset the GPU)", arch, gpuUUID, migModeValue(enabled))
	}
	if !enabled {
		// Turning MIG off destroys every GPU instance; the driver only
		// removes partitions one at a time, through DestroyPartition.
		rows, err := r.migProfiles(pt)
		if err != nil {
			return fmt.Errorf("cannot tell whether GPU instances exist: %w", err)
		}
		n, err := r.gpuInstanceCount(rows)
		if err != nil {
			return fmt.Errorf("cannot tell whether GPU instances exist: %w", err)
		}
		if n > 0 {
			return fmt.Errorf("%d GPU instance(s) exist; destroy the GPU's partitions first", n)
		}
	}

	activation, ret := r.h.SetMigMode(migModeValue(enabled))
	if err := check("nvmlDeviceSetMigMode", ret); err != nil {
		return err
	}
	if err := check("nvmlDeviceSetMigMode activation", activation); err != nil {
		return r.setMigModeBack(logger, pt.Enabled, fmt.Errorf("the change is pending: %w", err))
	}
	// SUCCESS should mean applied; the current mode is what Discover reads,
	// so check it rather than trust the status.
	cur, pending, ret := r.h.GetMigMode()
	if err := check("nvmlDeviceGetMigMode", ret); err != nil {
		return fmt.Errorf("mode set, but reading it back failed: %w", err)
	}
	if cur != migModeValue(enabled) {
		return r.setMigModeBack(logger, pt.Enabled, fmt.Errorf("the change is pending (current mode %d, pending %d)", cur, pending))
	}
	logger.V(2).Info("Set MIG mode")
	return nil
}

// setMigModeBack cancels a pending mode change by setting the mode the GPU
// is in, and returns cause with the outcome.
func (r *gpuReader) setMigModeBack(logger klog.Logger, was bool, cause error) error {
	activation, ret := r.h.SetMigMode(migModeValue(was))
	err := check("nvmlDeviceSetMigMode", ret)
	if err == nil {
		err = check("nvmlDeviceSetMigMode activation", activation)
	}
	if err != nil {
		logger.Error(err, "Could not cancel a pending MIG mode change; the next GPU reset applies it")
		return errors.Join(fmt.Errorf("%w; it needs a GPU reset, which the driver never does", cause),
			fmt.Errorf("cancelling the pending change failed, a GPU reset would apply it: %w", err))
	}
	logger.V(2).Info("Cancelled a pending MIG mode change", "cause", cause)
	return fmt.Errorf("%w; it needs a GPU reset, which the driver never does, so it was cancelled", cause)
}
