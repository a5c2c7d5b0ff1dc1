//go:build cgo && linux

package nvml

import (
	"context"
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"
)

// DestroyPartition implements backend.Backend. The partition is the MIG
// device with partitionUUID; its CI is destroyed, then its GI unless other
// compute instances (made outside Tessera) still use the GI. A partition
// that does not exist is not an error: the caller's goal, no such
// partition, is met (a retry after a crash, or a GPU whose MIG mode was
// turned off meanwhile). An unknown GPU is an error.
//
// If the CI is destroyed but the GI is not, the error says so, but a retry
// returns nil: the MIG device and its UUID went with the CI. The empty GI
// still holds its memory slices; DestroyStray (stray.go) finds and
// destroys such GIs.
func (b *Backend) DestroyPartition(ctx context.Context, gpuUUID, partitionUUID string) error {
	logger := klog.FromContext(ctx).WithValues("backend", "nvml", "gpu", gpuUUID, "uuid", partitionUUID)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.changes++
	if err := b.destroyPartition(ctx, logger, gpuUUID, partitionUUID); err != nil {
		return fmt.Errorf("nvml: destroy partition %s on GPU %s: %w", partitionUUID, gpuUUID, err)
	}
	return nil
}

func (b *Backend) destroyPartition(ctx context.Context, logger klog.Logger, gpuUUID, partitionUUID string) error {
	r, err := b.migReader(ctx, gpuUUID)
	if err != nil {
		return err
	}
	pt, err := r.migMode()
	if errors.Is(err, errNoMIG) || (err == nil && !pt.Enabled) {
		logger.V(4).Info("Partition to destroy does not exist: MIG is off on the GPU")
		return nil
	}
	if err != nil {
		return err
	}
	devices, err := r.migDevices()
	if err != nil {
		return err
	}
	giID, ciID, found := -1, -1, false
	for key, dev := range devices {
		if dev.uuid == partitionUUID {
			giID, ciID, found = key[0], key[1], true
			break
		}
	}
	if !found {
		logger.V(4).Info("Partition to destroy does not exist")
		return nil
	}

	gi, ret := r.h.GetGpuInstanceById(giID)
	if ret == nvml.ERROR_NOT_FOUND {
		logger.V(4).Info("Partition to destroy vanished while looking it up", "gpuInstance", giID)
		return nil
	}
	if err := check(fmt.Sprintf("nvmlDeviceGetGpuInstanceById(%d)", giID), ret); err != nil {
		return err
	}
	ci, ret := gi.GetComputeInstanceById(ciID)
	if ret == nvml.ERROR_NOT_FOUND {
		logger.V(4).Info("Partition to destroy vanished while looking it up", "gpuInstance", giID, "computeInstance", ciID)
		return nil
	}
	if err := check(fmt.Sprintf("nvmlGpuInstanceGetComputeInstanceById(GI %d, %d)", giID, ciID), ret); err != nil {
		return err
	}
	// CI first: NVML will not destroy a GI that still has a CI. A CI in use
	// by a process fails here (IN_USE) and nothing has changed.
	if err := check(fmt.Sprintf("nvmlComputeInstanceDestroy(GI %d CI %d)", giID, ciID), ci.Destroy()); err != nil {
		return err
	}

	// From here the partition is gone; only its GI may be left. A failure
	// is still reported, since the GI keeps its slices from new carves.
	rest, err := computeInstances(gi)
	if err != nil {
		return fmt.Errorf("compute instance destroyed, GI %d kept: %w", giID, err)
	}
	if len(rest) > 0 {
		logger.V(2).Info("Destroyed partition; its GPU instance stays for its other compute instances", "gpuInstance", giID, "computeInstances", len(rest))
		return nil
	}
	if err := check(fmt.Sprintf("nvmlGpuInstanceDestroy(GI %d)", giID), gi.Destroy()); err != nil {
		return fmt.Errorf("compute instance destroyed, GI %d kept: %w", giID, err)
	}
	logger.V(2).Info("Destroyed partition", "gpuInstance", giID, "computeInstance", ciID)
	return nil
}
