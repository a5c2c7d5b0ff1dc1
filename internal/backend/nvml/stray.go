//go:build cgo && linux

package nvml

import (
	"context"
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/backend"
)

var _ backend.StrayCleaner = (*Backend)(nil)

// DestroyStray implements backend.StrayCleaner: it destroys every GPU
// instance on the GPU that has no compute instance, and returns how many it
// destroyed.
//
// Such a GI is what DestroyPartition leaves when it destroyed the CI but
// not the GI: the MIG device (and with it the partition's UUID) is gone, so
// Discover, which lists MIG devices, no longer sees the GI and a retried
// destroy finds nothing to do, yet the GI still holds its memory slices and
// NVML refuses carves that overlap them. Nothing can be run on a GI
// without a CI, so destroying it loses no work. A GI with any CI, Tessera's
// or one made outside it, is a partition (or several) and is left alone.
//
// A GPU without MIG, or with MIG off, has no GPU instances. An unknown GPU
// is an error. A GI that cannot be checked or destroyed is reported by id
// after the others are tried, so one bad GI does not keep the rest.
func (b *Backend) DestroyStray(ctx context.Context, gpuUUID string) (int, error) {
	logger := klog.FromContext(ctx).WithValues("backend", "nvml", "gpu", gpuUUID)
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.destroyStray(ctx, logger, gpuUUID)
	if n > 0 {
		// Only a destroy changes the GPU; a sweep that found nothing (the
		// usual case at every start) leaves the Generation as it was.
		b.changes++
	}
	if err != nil {
		return n, fmt.Errorf("nvml: destroy stray GPU instances on GPU %s: %w", gpuUUID, err)
	}
	return n, nil
}

func (b *Backend) destroyStray(ctx context.Context, logger klog.Logger, gpuUUID string) (int, error) {
	r, err := b.migReader(ctx, gpuUUID)
	if err != nil {
		return 0, err
	}
	pt, err := r.migMode()
	if errors.Is(err, errNoMIG) || (err == nil && !pt.Enabled) {
		// Turning MIG off destroys every GI, so none can be left.
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	rows, err := r.migProfiles(pt)
	if err != nil {
		return 0, err
	}
	n := 0
	err = r.eachGPUInstance(rows, func(prof giProfile, gi nvml.GpuInstance) error {
		destroyed, err := destroyIfStray(logger, prof, gi)
		if destroyed {
			n++
		}
		return err
	})
	return n, err
}

// destroyIfStray destroys gi if it has no compute instance. A GI that
// cannot be shown to be empty is kept: destroying a partition in use would
// be far worse than keeping a stray one until the next try.
func destroyIfStray(logger klog.Logger, prof giProfile, gi nvml.GpuInstance) (bool, error) {
	info, ret := gi.GetInfo()
	if err := check("nvmlGpuInstanceGetInfo", ret); err != nil {
		return false, fmt.Errorf("a %s GPU instance: %w", prof.name, err)
	}
	busy, err := hasComputeInstance(gi)
	if err != nil {
		return false, fmt.Errorf("GI %d: %w", info.Id, err)
	}
	if busy {
		return false, nil
	}
	// NVML refuses (IN_USE) if a CI was made since the check, so a race
	// with nvidia-smi fails here rather than destroying a partition.
	if err := check(fmt.Sprintf("nvmlGpuInstanceDestroy(GI %d)", info.Id), gi.Destroy()); err != nil {
		return false, fmt.Errorf("GI %d: %w", info.Id, err)
	}
	logger.V(2).Info("Destroyed GPU instance without a compute instance", "gpuInstance", info.Id,
		"profile", prof.name, "placement", fmt.Sprintf("%d:%d", info.Placement.Start, info.Placement.Size))
	return true, nil
}

// hasComputeInstance reports whether gi has a CI of any profile. Unlike
// computeInstances it needs no CI's info: a CI whose info NVML will not
// give still makes the GI a partition.
func hasComputeInstance(gi nvml.GpuInstance) (bool, error) {
	for id := 0; id < nvml.COMPUTE_INSTANCE_PROFILE_COUNT; id++ {
		prof, ret := gi.GetComputeInstanceProfileInfo(id, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue // this CI profile does not exist on this GI
		}
		if err := check(fmt.Sprintf("nvmlGpuInstanceGetComputeInstanceProfileInfo(%d)", id), ret); err != nil {
			return false, err
		}
		cis, ret := gi.GetComputeInstances(&prof)
		if err := check(fmt.Sprintf("nvmlGpuInstanceGetComputeInstances(%d)", id), ret); err != nil {
			return false, err
		}
		if len(cis) > 0 {
			return true, nil
		}
	}
	return false, nil
}
