// Package backend defines the one interface between vendor code (nvml, amd,
// sim) and the vendor-neutral layers of Tessera.
package backend

import (
	"context"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/telemetry"
	"github.com/tessera-gpu/tessera/internal/vfio"
)

// Backend discovers a node's accelerators, carves and destroys partitions,
// and reports health events. Implementations must be safe for concurrent use.
type Backend interface {
	// Name is the backend's flag value: nvml, amd, sim.
	Name() string

	// Discover returns the node's current inventory. Calling it again after a
	// carve or destroy returns the new state.
	Discover(ctx context.Context) (*inventory.Node, error)

	// DevRoot is the host directory that plays the role of /dev for the
	// backend's devices: "/dev" on real hardware, a private tree for the
	// simulator. A container's /dev/nvidia0 is DevRoot/nvidia0 on the host.
	DevRoot() string

	// DeviceNumbers returns the type and numbers to write into a CDI spec for
	// a device node path (relative to /dev). ok=false means "let the
	// container runtime stat the host node", which is what real hardware wants.
	DeviceNumbers(devPath string) (major, minor int64, ok bool)

	// CreatePartition carves a partition of the given profile at the given
	// placement on the GPU with gpuUUID and returns it. It fails, changing
	// nothing, if the placement is invalid or overlaps an existing partition.
	CreatePartition(ctx context.Context, gpuUUID, profile string, placement inventory.Placement) (*inventory.Partition, error)

	// DestroyPartition removes the partition with partitionUUID from the GPU
	// with gpuUUID. Destroying a partition that does not exist is not an error.
	DestroyPartition(ctx context.Context, gpuUUID, partitionUUID string) error

	// SetPartitionMode turns partition mode (MIG mode) of the GPU with
	// gpuUUID on or off. It fails, changing nothing, where the change needs a
	// GPU reset (inventory.Partitioning.ModeChangeNeedsReset: the driver never
	// resets a GPU) or where partitions still exist; setting the mode the GPU
	// is already in is not an error.
	SetPartitionMode(ctx context.Context, gpuUUID string, enabled bool) error

	// WatchHealth sends health events until ctx ends, then returns.
	WatchHealth(ctx context.Context, events chan<- HealthEvent) error

	// Sharer applies time-slicing and MPS settings (sharing.go).
	Sharer
}

// Generationer is implemented by backends whose inventory can change while
// the agent runs (hot plug, a partition mode change, a partition carved or
// destroyed). Generation returns a value that changes whenever Discover's
// result may have; the agent polls it and republishes on a change.
type Generationer interface {
	Generation() (string, error)
}

// CgroupRooter is implemented by backends whose node's cgroup hierarchy is
// not the host's /sys/fs/cgroup: the simulator's tree of its own.
type CgroupRooter interface {
	CgroupRoot() string
}

// PCIHost is implemented by backends whose node's PCI sysfs is not the
// host's /sys: the simulator's tree, whose driver links move when the
// agent writes bind and unbind (internal/vfio/simfs). The agent passes
// GPUs through to virtual machines through it (docs/vfio.md).
type PCIHost interface {
	PCISysfs() vfio.Sysfs
}

// BootIDer is implemented by backends whose node has a boot id of its own
// rather than the host's: a simulated node reboots without its host.
type BootIDer interface {
	BootID() string
}

// StrayCleaner is implemented by backends where a partition can be left
// half made, invisible to Discover: an NVIDIA GPU instance without a compute
// instance, after a destroy that removed the compute instance but failed on
// the GPU instance. It holds its memory slices, so placements the scheduler
// believes free would fail to carve. The agent calls DestroyStray at start
// for every GPU it partitions dynamically; it returns how many it destroyed.
type StrayCleaner interface {
	DestroyStray(ctx context.Context, gpuUUID string) (int, error)
}

// TelemetryReader is implemented by backends that can read their devices'
// live telemetry (memory, utilization, temperature, power, clock). The
// agent's telemetry.Poller calls ReadTelemetry on its own interval, never
// on a scrape. It returns one sample per device it could read, keyed by
// the UUID Discover gives the device; a field the hardware does not report
// stays unknown, and it fails only when it could read nothing at all.
type TelemetryReader interface {
	ReadTelemetry(ctx context.Context) ([]telemetry.Sample, error)
}
