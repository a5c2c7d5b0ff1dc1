package gpuvendor

import (
	"fmt"
	"strings"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// Vendor is one GPU maker's rules. Implementations hold no state.
type Vendor interface {
	// Name is the vendor as the inventory and the vendor attribute name it.
	Name() inventory.Vendor
	// DisplayName is how messages name the vendor: NVIDIA, AMD.
	DisplayName() string
	// Capabilities is what the vendor's GPUs can share and enforce.
	Capabilities() Capabilities

	// GPUNodes are the nodes of the whole GPU g.
	GPUNodes(g *inventory.GPU) ([]Node, error)
	// PartitionNodes are the nodes partition p of g has of its own: they
	// exist exactly as long as the partition does.
	PartitionNodes(g *inventory.GPU, p *inventory.Partition) ([]Node, error)
	// DeviceNodes are the nodes a container using the device needs, the
	// vendor's common nodes aside: the whole GPU g when p is nil, else its
	// partition p.
	DeviceNodes(g *inventory.GPU, p *inventory.Partition) ([]Node, error)
	// CommonNodes are the nodes every container with at least one of the
	// vendor's devices needs, once, whichever devices it has.
	CommonNodes() []Node
	// HostNodes are the nodes a host with gpus (all the vendor's) has
	// besides their own, their partitions' and the common ones: nodes no
	// container gets, which the simulator still imitates.
	HostNodes(gpus []*inventory.GPU) []Node
	// CommonEnv is the environment every container with one of the claim's
	// devices of this vendor gets, given all of them in claim order.
	CommonEnv(devs []Device) ([]string, error)
	// OrderedDevicesEnv is the variable that lists gpus, whole GPUs of the
	// vendor, to a container in exactly this order (an NCCL topology
	// file's rank order): the runtime's visible-devices variable, naming
	// each GPU as the runtime accepts it.
	OrderedDevicesEnv(gpus []*inventory.GPU) (string, error)
	// OwnSpec is how the devices of the node-wide CDI spec the vendor's own
	// tools generate are found for a claim's device; nil where it has none.
	OwnSpec() OwnSpec
	// Collective is how the vendor's collective library reads an NCCL
	// topology file; nil where it has none.
	Collective() Collective
	// Majors names the character-device regions of the vendor's nodes (as
	// /proc/devices lists the drivers), in a fixed order; every Node.Major
	// is one of them.
	Majors() []string
}

// OwnSpec is the node-wide CDI spec a vendor's own tools generate
// (nvidia-ctk's), whose devices carry what a per-claim spec does not: the
// driver's user-space libraries, firmware and hooks. A claim's device gets
// the ID of the spec's device that is the same GPU or partition.
type OwnSpec interface {
	// Kind is the spec's kind, vendor/class.
	Kind() string
	// Key is the key of a spec device from the device nodes it carries
	// (container paths); ok false for one that is no single GPU or
	// partition.
	Key(nodes []string) (key string, ok bool)
	// DeviceKey is the key the spec device of the whole GPU g (p nil) or
	// of its partition p has.
	DeviceKey(g *inventory.GPU, p *inventory.Partition) (key string, ok bool)
}

// Collective is what differs by vendor in the topology file a collective
// library reads (internal/nccltopo: NCCL for NVIDIA, RCCL for AMD, which
// reads the same shape).
type Collective interface {
	// Library names it in messages: NCCL, RCCL.
	Library() string
	// SystemVersion is the system element's version attribute.
	SystemVersion() string
	// LinkTag is the element a GPU's direct links are written as.
	LinkTag() string
	// PeerLink is the kind of a direct link between two of its GPUs.
	PeerLink() inventory.LinkKind
	// LinkGBps is one link's unidirectional bandwidth from g (the file
	// counts links, the inventory has bandwidth).
	LinkGBps(g *inventory.GPU) int64
	// GPUAttrs are the gpu element's attributes after dev, in order: sm
	// and what else the library reads.
	GPUAttrs(g *inventory.GPU) ([][2]string, error)
	// PCIClass is the PCI class g's pci element carries.
	PCIClass(g *inventory.GPU) string
}

// Capabilities is what sharing can do on a vendor's GPUs. The zero value
// is a vendor that can only time-slice at its fixed interval and has no
// partitions.
type Capabilities struct {
	// PartitionKind is the vendor's partitioning technology; "" for none.
	PartitionKind inventory.PartitionKind
	// DynamicPartitions is true where the agent may make partitions per
	// claim (--partitioning=dynamic): NVIDIA MIG instances, carved one by
	// one, and AMD compute partitions, made by setting the GPU's mode.
	DynamicPartitions bool
	// PartitionModes is true where a GPU's partitions are a mode of the
	// whole GPU rather than cut one by one: all of one profile (the mode),
	// made together when the mode is set and gone when it changes (AMD
	// compute partitions: SPX, DPX, QPX, CPX). A mode changes only while no
	// claim holds a partition of the GPU, and the GPU returns to its rest
	// mode (the one with the fewest partitions: SPX, the whole GPU) when
	// the last one goes.
	PartitionModes bool
	// PartitionPeerLinks is true where a partition keeps its GPU's direct
	// links to other GPUs (an AMD compute partition is part of the GPU's
	// xGMI hive); false where a partition has no peer-to-peer path (MIG:
	// NVIDIA's MIG user guide, "Application Considerations"), so each is a
	// fabric island of its own.
	PartitionPeerLinks bool
	// Passthrough is true where a whole GPU can be bound to vfio-pci and
	// handed to a virtual machine (internal/vfio).
	Passthrough bool
	// HostDriver is the kernel driver that binds the vendor's GPUs on the
	// host: a GPU is passed through only from it (one bound to another
	// driver is refused), and goes back to it at unprepare. "" where the
	// vendor's GPUs cannot be passed.
	HostDriver string
	// PCIVendorID is the vendor's PCI vendor ID as sysfs's vendor file
	// writes it (0x10de): how a GPU is known in sysfs while no driver of
	// the vendor holds it (the start-up sweep of internal/claims).
	PCIVendorID string
	// TimeSliceIntervals is true where a whole GPU's time-slice interval
	// can be set to something other than the default.
	TimeSliceIntervals bool
	// MPS is true where processes can share a device under an MPS daemon.
	MPS bool
	// EnforcedShares is true where a capacity share's memory and compute
	// are enforced (each client limited by the device's MPS daemon), false
	// where they are the scheduler's accounting only.
	EnforcedShares bool
	// DmemRegion is the name format of a GPU's region in the dmem cgroup
	// controller, with %s its PCI address; "" where the driver registers
	// none. A share can be held by the kernel only on a GPU with a region.
	DmemRegion string
	// KernelLimit is how a cgroup's limit on the region is set: "dmem"
	// (its dmem.max) or "nvml" (the driver's own call, which says not to
	// write its dmem files); internal/memlimit's mechanisms.
	KernelLimit string
	// KernelMemoryDriver is the oldest driver that registers the region
	// and enforces a cgroup's limit on it; "" for any.
	KernelMemoryDriver string
	// KernelMemoryPartitions is true where a partition's memory can be
	// limited per cgroup too (not MIG: MPS memory partitioning excludes it).
	KernelMemoryPartitions bool
	// MPSNamespacesDriver is the oldest driver whose MPS has servers and
	// namespaces (MPS v3): each share then gets a namespace of its own, and
	// its containers see only that namespace's socket, not the daemon's
	// control pipe. "" where MPS has none.
	MPSNamespacesDriver string
}

// Node is one device node. Major names its character-device region, not a
// number: hardware numbers come from the host, the simulator makes up its
// own per region.
type Node struct {
	Path  string // relative to /dev: nvidia0, dri/renderD128
	Major string // one of the vendor's Majors
	Minor int64
}

// Paths returns the nodes' paths, in order.
func Paths(nodes []Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Path
	}
	return out
}

// Device is one allocated device as a vendor sees it.
type Device struct {
	// Name names the device in errors: pool/device.
	Name string
	// GPU is the whole GPU, the parent for a partition.
	GPU *inventory.GPU
	// Partition is nil for a whole GPU.
	Partition *inventory.Partition
}

// UUID is the partition's UUID for a partition, the GPU's otherwise.
func (d Device) UUID() string {
	if d.Partition != nil {
		return d.Partition.UUID
	}
	return d.GPU.UUID
}

// UUIDList joins ids with commas, refusing an empty one or one holding a
// comma (a visible-devices list could not say it); gpus name them in errors.
func UUIDList(gpus []*inventory.GPU, ids []string) (string, error) {
	for i, id := range ids {
		if id == "" || strings.Contains(id, ",") {
			return "", fmt.Errorf("GPU %s has no usable UUID (%q)", gpus[i].PCIBusID, id)
		}
	}
	return strings.Join(ids, ","), nil
}

// CheckMinor refuses a negative device minor; what names it in the error.
func CheckMinor(what string, n int) error {
	if n < 0 {
		return fmt.Errorf("%s %d is negative", what, n)
	}
	return nil
}
