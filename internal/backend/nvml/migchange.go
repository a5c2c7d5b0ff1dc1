//go:build cgo && linux

package nvml

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// What CreatePartition, DestroyPartition, SetPartitionMode and DestroyStray
// share: each holds b.mu for the whole change, so Discover never sees a
// half-carved GPU and two changes to one GPU never interleave, and each
// starts from the GPU read the way Discover reads it, so names, placements
// and the reset rule are the ones the inventory published.

// errUnknownGPU: no GPU with the UUID is on this node. DestroyPartition must
// fail on it (a partition can only be absent from a GPU that exists).
var errUnknownGPU = errors.New("no such GPU on this node")

// migReader opens the GPU with uuid for a MIG change: its cached handle and
// the values that MIG names and rules depend on (architecture for the reset
// rule, memory for profile names). The caller holds b.mu.
func (b *Backend) migReader(ctx context.Context, uuid string) (*gpuReader, error) {
	if b.closed {
		return nil, errors.New("backend is closed")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.refreshHandles()
	for _, h := range b.handles {
		if h == nil {
			continue
		}
		got, ret := h.GetUUID()
		if check("nvmlDeviceGetUUID", ret) != nil || got != uuid {
			// A GPU that cannot say its UUID is not the one asked for;
			// Discover reports it.
			continue
		}
		r := &gpuReader{b: b, h: h, g: &inventory.GPU{Vendor: inventory.VendorNVIDIA, UUID: uuid, NUMANode: -1}}
		r.architecture()
		r.memory()
		if len(r.reasons) > 0 {
			return nil, errors.New(strings.Join(r.reasons, "; "))
		}
		return r, nil
	}
	return nil, fmt.Errorf("%w: %s", errUnknownGPU, uuid)
}

// gpuInstanceCount counts the GPU's GPU instances over its profile rows,
// including GIs without a compute instance, which hold slices too.
func (r *gpuReader) gpuInstanceCount(rows []giProfile) (int, error) {
	n := 0
	err := r.eachGPUInstance(rows, func(giProfile, nvml.GpuInstance) error {
		n++
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
