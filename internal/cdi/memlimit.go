package cdi

import (
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/memlimit"
)

// KernelLimits is how the node holds shares' memory in the kernel: the
// hook the specs run, and for a GPU or partition how its limit is set, ok
// false where the kernel does not hold its shares (isolation.Assess).
type KernelLimits struct {
	Hook memlimit.Hook
	For  func(gpu *inventory.GPU, p *inventory.Partition) (m memlimit.Mechanism, region string, ok bool)
}

// hookTimeout bounds a hook run (seconds): a limit is a few file writes or
// one NVML call, and a hung hook must fail the container, not hold it.
var hookTimeout = 10

// limitBytes is the memory a device's containers are limited to: a
// share's, or an MPS config's pinned memory limit; 0 for none.
func limitBytes(d *ClaimDevice) int64 {
	switch {
	case d.Sharing.IsShare():
		return d.Sharing.Share.MemoryBytes
	case d.Sharing.IsMPS():
		return d.Sharing.MPSPinnedMemoryLimit
	}
	return 0
}

// memoryLimitHooks are the hooks a container of d gets where the kernel
// holds d's limit: createRuntime sets it on the container's cgroup before
// its process starts, or fails its creation; poststop forgets it. None
// where the device has no limit or the kernel does not hold it.
func (w *Writer) memoryLimitHooks(claim ClaimRef, d *ClaimDevice) ([]*cdispec.Hook, error) {
	share := limitBytes(d)
	if w.limits == nil || share == 0 {
		return nil, nil
	}
	mech, region, ok := w.limits.For(&d.GPU, d.Partition)
	if !ok {
		return nil, nil
	}
	b, err := memlimit.Bytes(share)
	if err != nil {
		return nil, err
	}
	// A share bounds the claim: one container holds it at a time. An MPS
	// claim owns its device, and its pinned memory limit is per client, as
	// MPS applies it: each container gets its own.
	l := memlimit.Limit{ClaimUID: claim.UID, Claim: claim.Namespace + "/" + claim.Name, Device: d.Device, Mechanism: mech, Region: region, Bytes: b, EachContainer: !d.Sharing.IsShare()}
	if mech == memlimit.NVML {
		l.GPU = d.GPU.UUID
	}
	h := w.limits.Hook
	return []*cdispec.Hook{
		{HookName: cdiapi.CreateRuntimeHook, Path: h.Path, Args: h.LimitArgs(l), Timeout: &hookTimeout},
		{HookName: cdiapi.PoststopHook, Path: h.Path, Args: h.ReleaseArgs(), Timeout: &hookTimeout},
	}, nil
}
