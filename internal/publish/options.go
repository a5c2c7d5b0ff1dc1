package publish

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/isolation"
	"github.com/tessera-gpu/tessera/internal/names"
)

// Partitioning is how a node publishes partitionable GPUs.
type Partitioning string

const (
	// Static publishes the partitions that exist (cut by an operator) and
	// whole GPUs whose partition mode is off: what the node is now.
	Static Partitioning = names.PartitioningStatic
	// Dynamic publishes every placement of every MIG profile with shared
	// counters (KEP-4815) next to the whole GPU, so the scheduler picks a
	// placement and the driver carves it at prepare.
	Dynamic Partitioning = names.PartitioningDynamic
)

// ParsePartitioning parses the --partitioning flag value.
func ParsePartitioning(s string) (Partitioning, error) {
	switch p := Partitioning(s); p {
	case Static, Dynamic:
		return p, nil
	case "":
		return Static, nil
	}
	return "", fmt.Errorf("partitioning %q is not static or dynamic", s)
}

// Options tune Build.
type Options struct {
	Partitioning Partitioning
	// Profiles, when not empty, are the only partition profiles whose
	// placements a dynamic GPU publishes (the agent's --dynamic-profiles):
	// fewer devices for the scheduler to scan per node. A partition that
	// exists at a placement of another profile is still published, so the
	// claim holding it keeps its device.
	Profiles []string
	// Window, on a dynamic node, is how many GPUs without partitions
	// publish their placements besides those with partitions (the agent's
	// --dynamic-window; window.go); their whole GPUs are always published.
	// 0 publishes every GPU's placements.
	Window int
	// Open reports whether the dynamic GPU named gpu (gpu-<n>) had its
	// placements published before this build: an open GPU stays open until
	// a claim holds it whole. Nil means every GPU's were (nothing is known
	// of the slices before, the safe assumption).
	Open func(gpu string) bool
	// DeferOpen opens no GPU that is closed, only closes: the agent opens
	// GPUs in a republish of their own (window.go).
	DeferOpen bool
	// HeldWhole reports whether a claim holds the GPU with UUID gpu whole:
	// with a window, that GPU's placements close. Nil: none does.
	HeldWhole func(gpu string) bool
	// Sharing says whether whole GPUs and static partitions are published
	// multi-allocatable (shared.go); empty is SharingNone.
	Sharing Sharing
	// Held reports whether a claim holds partition p of GPU gpu (or is
	// carving it). On a dynamic GPU, what a partition nobody holds takes (a
	// stuck orphan the start-up sweep could not destroy, one cut by hand) is
	// withheld from the GPU's counter set, so the scheduler stops choosing
	// placements the hardware would refuse. Held partitions need nothing:
	// their claims' allocations already consume their counters. Nil means
	// every partition is held (the build before the checkpoint is read).
	Held func(gpu string, p *inventory.Partition) bool
	// Taints returns the device taints of the GPU with UUID gpu (its
	// health, internal/health); they are published on the GPU and on every
	// partition and placement of it. Nil publishes none.
	Taints func(gpu string) []resourceapi.DeviceTaint
	// Isolation says how a share or MPS limit of partition p of gpu (p nil:
	// the whole GPU) is held on this node, published as memoryIsolation on
	// every device, and whether its shares get MPS namespaces of their own,
	// as mpsNamespace where MPS holds them (internal/isolation). Nil publishes
	// neither.
	Isolation func(gpu *inventory.GPU, p *inventory.Partition) isolation.Assessment
	// MinShareIsolation, with SharingCapacity, shares only devices whose
	// shares Isolation holds at least this strongly; the others are
	// published whole (the agent's --min-share-isolation). Empty shares
	// every device.
	MinShareIsolation isolation.Level
	// IOMMUGroup, where the agent passes GPUs through to virtual machines,
	// is the IOMMU group of a GPU that can be passed (its group holds
	// nothing but GPUs and bridges); such a GPU, published whole and
	// unshared, carries it as iommuGroup, which the vfio class selects on
	// (docs/vfio.md). Nil publishes none.
	IOMMUGroup func(g *inventory.GPU) (int, bool)
	// Passed are the GPUs claims passed through to virtual machines: none
	// of their devices is published meanwhile (vfio-pci holds them; the
	// allocator must not see their placements or shares), and each keeps
	// its place in the gpu-<n> order even where Discover no longer lists
	// it (Result.Passed).
	Passed []PassedGPU
	// WholeLegacyMPS, with SharingCapacity, publishes whole the devices
	// whose shares would run under MPS without namespaces of their own
	// (legacy MPS: every share reaches the one daemon's control pipe); the
	// agent's --legacy-mps-shares=whole.
	WholeLegacyMPS bool
}

// Carve is what prepare must cut for a dynamically published partition.
type Carve struct {
	Profile   string
	Placement inventory.Placement
}

// GPUMode says how a GPU was published, for the agent's log.
type GPUMode struct {
	Device string // gpu-<n>
	UUID   string
	// Mode is "whole", "partitions", "whole+partitions" (static) or
	// "dynamic"; Reason says why a MIG-capable GPU is not dynamic.
	Mode, Reason string
	// Withheld names the partitions of a dynamic GPU that no claim holds:
	// the counters they take are withheld from its counter set.
	Withheld []string
}
