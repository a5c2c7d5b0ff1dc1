//go:build cgo && linux

package nvml

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// CreatePartition implements backend.Backend. A partition is one GPU
// instance (GI) of the profile at the placement, with one compute instance
// (CI) that spans the whole GI: that CI is the MIG device a container opens.
//
// The profile and placement are checked against the table Discover
// publishes before NVML is asked to create anything. Whether the slots are
// free is NVML's to say (it refuses an overlapping placement, or a GPU out
// of compute slices or of the profile's instances), as the driver is the
// only authority on what exists. Any failure after the GI exists destroys
// what was made, so on failure the GPU is as it was.
func (b *Backend) CreatePartition(ctx context.Context, gpuUUID, profile string, placement inventory.Placement) (*inventory.Partition, error) {
	logger := klog.FromContext(ctx).WithValues("backend", "nvml", "gpu", gpuUUID, "profile", profile,
		"placement", fmt.Sprintf("%d:%d", placement.Start, placement.Size))
	b.mu.Lock()
	defer b.mu.Unlock()
	b.changes++
	p, err := b.createPartition(ctx, logger, gpuUUID, profile, placement)
	if err != nil {
		return nil, fmt.Errorf("nvml: create partition %s at %d on GPU %s: %w", profile, placement.Start, gpuUUID, err)
	}
	logger.V(2).Info("Created partition", "uuid", p.UUID, "gpuInstance", p.GPUInstanceID, "computeInstance", p.ComputeInstanceID)
	return &p, nil
}

func (b *Backend) createPartition(ctx context.Context, logger klog.Logger, gpuUUID, profile string, placement inventory.Placement) (inventory.Partition, error) {
	r, err := b.migReader(ctx, gpuUUID)
	if err != nil {
		return inventory.Partition{}, err
	}
	row, at, err := r.migPlan(profile, placement)
	if err != nil {
		return inventory.Partition{}, err
	}
	return r.carve(logger, row, at)
}

// migPlan checks profile and placement against the GPU's table as Discover
// publishes it and returns the profile's NVML row and the placement with
// its size. Size 0 means the profile's size, as in the simulated backend.
func (r *gpuReader) migPlan(profile string, placement inventory.Placement) (giProfile, inventory.Placement, error) {
	pt, err := r.migMode()
	if err != nil {
		return giProfile{}, placement, err
	}
	if !pt.Enabled {
		// Carving would fail in NVML anyway; saying why saves a lookup.
		return giProfile{}, placement, errors.New("MIG mode is not enabled on the GPU (SetPartitionMode enables it)")
	}
	rows, err := r.migProfiles(pt)
	if err != nil {
		return giProfile{}, placement, err
	}
	pp := pt.Profile(profile)
	if pp == nil {
		var names []string
		for _, p := range pt.Profiles {
			names = append(names, p.Name)
		}
		return giProfile{}, placement, fmt.Errorf("the GPU has no MIG profile %q (it has: %s)", profile, strings.Join(names, ", "))
	}
	at := placement
	if at.Size == 0 {
		at.Size = pp.MemorySlices
	}
	if !slices.Contains(pp.Placements, at) {
		var valid []string
		for _, pl := range pp.Placements {
			valid = append(valid, fmt.Sprintf("%d:%d", pl.Start, pl.Size))
		}
		return giProfile{}, placement, fmt.Errorf("placement %d:%d is not one of profile %s's placements (%s)",
			at.Start, at.Size, profile, strings.Join(valid, ", "))
	}
	for _, row := range rows {
		if row.name == profile {
			return row, at, nil
		}
	}
	// pt.Profiles and rows are built together, so this is a bug.
	return giProfile{}, placement, fmt.Errorf("profile %s has no NVML row", profile)
}

// fullComputeInstanceProfile is, by a GI's compute slice count, the CI
// profile that takes all of them. NVML also has _REV1 CI profiles of the
// same sizes on some GPUs; the plain one is the default a GI is used with.
var fullComputeInstanceProfile = map[uint32]int{
	1: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE,
	2: nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE,
	3: nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE,
	4: nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE,
	6: nvml.COMPUTE_INSTANCE_PROFILE_6_SLICE,
	7: nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE,
	8: nvml.COMPUTE_INSTANCE_PROFILE_8_SLICE,
}

// carve creates the GI of row at the placement and its full-size CI, finds
// the MIG device NVML made for them and returns it as Discover would. On
// failure it destroys what it made, CI first: NVML will not destroy a GI
// that still has a compute instance.
func (r *gpuReader) carve(logger klog.Logger, row giProfile, at inventory.Placement) (p inventory.Partition, err error) {
	// gi and ci are set only once NVML has made them: a failed create
	// returns a non-nil zero handle that must not be destroyed.
	var gi nvml.GpuInstance
	var ci nvml.ComputeInstance
	defer func() {
		if err == nil || gi == nil {
			return
		}
		if rbErr := rollback(gi, ci); rbErr != nil {
			logger.Error(rbErr, "Rolling back a failed carve left MIG instances behind")
			err = fmt.Errorf("%w; rolling back failed, MIG instances may be left behind: %w", err, rbErr)
			return
		}
		logger.V(4).Info("Rolled back a failed carve", "err", err)
	}()

	madeGI, ret := r.h.CreateGpuInstanceWithPlacement(&row.info, &nvml.GpuInstancePlacement{Start: uint32(at.Start), Size: uint32(at.Size)})
	if err := check("nvmlDeviceCreateGpuInstanceWithPlacement", ret); err != nil {
		if is(err, nvml.ERROR_INSUFFICIENT_RESOURCES) {
			return p, fmt.Errorf("%w: the placement overlaps a GPU instance, or the GPU's compute slices or the profile's instances are used up", err)
		}
		return p, err
	}
	gi = madeGI

	ciProfileID, ok := fullComputeInstanceProfile[row.info.SliceCount]
	if !ok {
		return p, fmt.Errorf("no compute instance profile spans a %d-slice GPU instance", row.info.SliceCount)
	}
	ciProfile, ret := gi.GetComputeInstanceProfileInfo(ciProfileID, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
	if err := check(fmt.Sprintf("nvmlGpuInstanceGetComputeInstanceProfileInfo(%d)", ciProfileID), ret); err != nil {
		return p, err
	}
	madeCI, ret := gi.CreateComputeInstance(&ciProfile)
	if err := check("nvmlGpuInstanceCreateComputeInstance", ret); err != nil {
		return p, err
	}
	ci = madeCI

	// Ids and placement as NVML reports them, which is what Discover reads.
	giInfo, ret := gi.GetInfo()
	if err := check("nvmlGpuInstanceGetInfo", ret); err != nil {
		return p, err
	}
	ciInfo, ret := ci.GetInfo()
	if err := check("nvmlComputeInstanceGetInfo", ret); err != nil {
		return p, err
	}
	// A CI without a MIG device cannot be handed to a container: the carve
	// has not produced a partition.
	devices, err := r.migDevices()
	if err != nil {
		return p, err
	}
	dev, ok := devices[[2]int{int(giInfo.Id), int(ciInfo.Id)}]
	if !ok {
		return p, fmt.Errorf("no MIG device handle for GI %d CI %d", giInfo.Id, ciInfo.Id)
	}
	return migPartition(row, giInfo, ciEntry{info: ciInfo, profile: ciProfile}, dev), nil
}

// rollback destroys a carve's CI (if made), then its GI.
func rollback(gi nvml.GpuInstance, ci nvml.ComputeInstance) error {
	var errs []error
	if ci != nil {
		if err := check("nvmlComputeInstanceDestroy", ci.Destroy()); err != nil {
			errs = append(errs, err)
		}
	}
	if err := check("nvmlGpuInstanceDestroy", gi.Destroy()); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
