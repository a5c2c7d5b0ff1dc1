package publish

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/tessera-gpu/tessera/internal/isolation"
)

// Sharing is how a node publishes devices that several claims may hold.
type Sharing string

const (
	// SharingNone publishes every device for one claim at a time (claims
	// share a device only by naming the same ResourceClaim).
	SharingNone Sharing = "none"
	// SharingCapacity publishes whole GPUs and static partitions as
	// multi-allocatable (KEP-5075 consumable capacity): claims consume
	// memory and compute units and the scheduler keeps their sum within the
	// device. GPUs published dynamically stay one-claim devices: counters
	// and multiple allocations are never mixed on one GPU.
	SharingCapacity Sharing = "capacity"
)

// ParseSharing parses the --sharing flag value.
func ParseSharing(s string) (Sharing, error) {
	switch v := Sharing(s); v {
	case SharingNone, SharingCapacity:
		return v, nil
	case "":
		return SharingNone, nil
	}
	return "", fmt.Errorf("sharing %q is not none or capacity", s)
}

// How shares are sized (docs/sharing.md): memory in steps of 1Mi from a
// minimum of 1Gi, defaulting to the device's whole memory, so a claim that
// asks no capacity gets the whole device as before; compute units and
// engines default to 0, so a memory-only share consumes none of them.
const (
	ShareMemoryMin  = int64(1) << 30
	ShareMemoryStep = int64(1) << 20
)

// SharedCapacity is what a multi-allocatable device offers its shares.
type SharedCapacity struct {
	MemoryBytes  int64
	ComputeUnits int64
}

// makeShareable marks d multi-allocatable and gives each capacity its
// request policy. Memory is published in whole MiB (what a step from the
// minimum can reach exactly), rounded down; the rest are counts.
func makeShareable(d *resourceapi.Device) (*SharedCapacity, error) {
	mem, ok := d.Capacity[CapMemory]
	if !ok {
		return nil, fmt.Errorf("device %s has no memory capacity to share", d.Name)
	}
	bytes := mem.Value.Value() / ShareMemoryStep * ShareMemoryStep
	if bytes <= 0 {
		return nil, fmt.Errorf("device %s has %s of memory, less than the 1Mi a share is counted in", d.Name, mem.Value.String())
	}
	minMem := min(ShareMemoryMin, bytes)
	caps := make(map[resourceapi.QualifiedName]resourceapi.DeviceCapacity, len(d.Capacity))
	out := &SharedCapacity{MemoryBytes: bytes}
	for name, c := range d.Capacity {
		switch name {
		case CapMemory:
			caps[name] = resourceapi.DeviceCapacity{
				Value: *resource.NewQuantity(bytes, resource.BinarySI),
				RequestPolicy: &resourceapi.CapacityRequestPolicy{
					Default: resource.NewQuantity(bytes, resource.BinarySI),
					ValidRange: &resourceapi.CapacityRequestPolicyRange{
						Min:  resource.NewQuantity(minMem, resource.BinarySI),
						Step: resource.NewQuantity(ShareMemoryStep, resource.BinarySI),
					},
				},
			}
		default:
			if name == CapComputeUnits {
				out.ComputeUnits = c.Value.Value()
			}
			r := &resourceapi.CapacityRequestPolicyRange{Min: resource.NewQuantity(0, resource.DecimalSI)}
			if c.Value.Value() >= 1 {
				// Whole units; the API refuses a step beyond the value.
				r.Step = resource.NewQuantity(1, resource.DecimalSI)
			}
			caps[name] = resourceapi.DeviceCapacity{
				Value:         c.Value,
				RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: resource.NewQuantity(0, resource.DecimalSI), ValidRange: r},
			}
		}
	}
	d.Capacity = caps
	d.AllowMultipleAllocations = ptr.To(true)
	return out, nil
}

// UnsharedReason says why a device that --sharing=capacity would share is
// published whole (Entry.Unshared), for the agent's log.
type UnsharedReason string

const (
	// UnsharedMemoryUnknown: the device has no memory capacity (the
	// backend could not read its memory) or less than the 1Mi shares are
	// counted in, so there is nothing to count shares in. It is published
	// whole rather than failing the node's slices: one odd GPU must not
	// take the others off the scheduler.
	UnsharedMemoryUnknown UnsharedReason = "memory-unknown"
	// UnsharedIsolation: its shares would be held less strongly than
	// Options.MinShareIsolation.
	UnsharedIsolation UnsharedReason = "isolation"
	// UnsharedLegacyMPS: its shares would run under legacy MPS, every one
	// reaching the daemon's control pipe (Options.WholeLegacyMPS).
	UnsharedLegacyMPS UnsharedReason = "legacy-mps"
)

// share makes a whole GPU or static partition multi-allocatable when the
// node shares by capacity, or records on its entry why it stays whole.
func (o Options) share(it *item) error {
	if o.Sharing != SharingCapacity {
		return nil
	}
	if why := o.unshared(it); why != "" {
		it.entry.Unshared = why
		return nil
	}
	c, err := makeShareable(&it.dev)
	if err != nil {
		return err
	}
	it.entry.Shared = c
	return nil
}

// unshared says why the item's device is published whole; "" to share it.
func (o Options) unshared(it *item) UnsharedReason {
	if mem, ok := it.dev.Capacity[CapMemory]; !ok || mem.Value.Value() < ShareMemoryStep {
		return UnsharedMemoryUnknown
	}
	if o.Isolation == nil {
		return ""
	}
	a := o.Isolation(it.entry.GPU, it.entry.Partition)
	if o.WholeLegacyMPS && a.Level == isolation.Process && !a.MPSNamespace {
		return UnsharedLegacyMPS
	}
	if o.MinShareIsolation != "" && !a.Level.AtLeast(o.MinShareIsolation) {
		return UnsharedIsolation
	}
	return ""
}
