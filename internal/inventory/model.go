package inventory

// Vendor names the maker of a GPU as published in the `vendor` attribute.
type Vendor string

const (
	VendorNVIDIA Vendor = "nvidia"
	VendorAMD    Vendor = "amd"
)

// LinkKind is the kind of interconnect between two GPUs (or a GPU and a switch).
type LinkKind string

const (
	LinkNVLink   LinkKind = "nvlink"   // direct GPU-to-GPU NVLink (bridges, cube-mesh)
	LinkNVSwitch LinkKind = "nvswitch" // GPU to an NVSwitch plane; all GPUs on one plane reach each other
	LinkXGMI     LinkKind = "xgmi"     // AMD Infinity Fabric (xGMI) GPU-to-GPU
	LinkPCIe     LinkKind = "pcie"     // PCIe peer path; never makes a fabric island
)

// PartitionKind is the vendor's partitioning technology.
type PartitionKind string

const (
	PartitionMIG PartitionKind = "mig" // NVIDIA Multi-Instance GPU
	PartitionXCP PartitionKind = "xcp" // AMD compute partition (CPX/DPX/QPX)
)

// Node is everything a backend discovered on one node.
type Node struct {
	GPUs  []GPU
	Links []Link
	// Unpublished are the GPUs the backend found that publish no device,
	// each with why: left out of GPUs where they cannot be named, kept in
	// GPUs (their place in the gpu-<n> order, their health) where nothing
	// of them can be published. The agent counts them
	// (tessera_gpus_unpublished), so a GPU missing from the slices is
	// never silent.
	Unpublished []Unpublished
}

// UnpublishedReason is why a GPU is left out, a short fixed word (it is a
// metric label).
type UnpublishedReason string

const (
	// UnpublishedLost: the GPU answered that it has fallen off the bus
	// (NVML ERROR_GPU_IS_LOST) before it could be named.
	UnpublishedLost UnpublishedReason = "lost"
	// UnpublishedUnreadable: the GPU's identity could not be read for
	// another reason.
	UnpublishedUnreadable UnpublishedReason = "unreadable"
	// UnpublishedNoProfiles: partition mode is on but the GPU reports no
	// partition profile, so nothing on it can be published.
	UnpublishedNoProfiles UnpublishedReason = "no-partition-profiles"
	// UnpublishedAmbiguous: the GPU cannot be told apart from another
	// (two AMD GPUs at one PCI address, KFD without PCI domains), so
	// neither is published rather than both merged into one.
	UnpublishedAmbiguous UnpublishedReason = "ambiguous"
)

// Values of a published GPU a backend may be unable to read
// (Unpublished.Value): the names of the capacity or attribute left out.
const (
	ValueMemory          = "memory"
	ValueComputeUnits    = "computeUnits"
	ValueFabricBandwidth = "fabricBandwidthGBps"
	ValueModel           = "model"
	// ValueGFXVersion: the AMD gfx target (gfxVersion, and architecture,
	// which follows from it); kernels before gfx_target_version have none.
	ValueGFXVersion = "gfxVersion"
)

// Unpublished is a GPU found and left out, or, with Value, one value of a
// published GPU that the backend could not read.
type Unpublished struct {
	// GPU names it as well as the backend could: UUID, PCI bus ID, or
	// its index in the vendor library ("nvml index 3").
	GPU    string
	Reason UnpublishedReason
	// Value, when set, says the GPU is published and only this value of
	// it is unknown (ValueMemory, ...): left out of its devices, the model
	// published as "unknown". The agent counts these apart
	// (tessera_gpu_values_unknown), so tessera_gpus_unpublished stays a
	// count of GPUs that publish no device.
	Value   string
	Message string
}

// GPU is one physical GPU (for AMD multi-die cards, one GCD as the driver exposes it).
type GPU struct {
	Vendor       Vendor
	Model        string // short and stable: H100, A100, MI300X
	ProductName  string // as the driver reports it: "NVIDIA H100 80GB HBM3"
	Architecture string // lowercase one word: hopper, ampere, cdna3
	UUID         string

	DriverVersion     string // semver-compatible: 580.65.6
	ComputeCapability string // NVIDIA only, semver: 9.0.0
	GFXVersion        string // AMD only, semver: 9.4.2

	// MemoryBytes and ComputeUnits are 0 where the backend could not read
	// them: no GPU has none of either, so 0 is unknown, never a value, and
	// the capacity is left out of the GPU's device (publish.capacities).
	// A backend may say why in Node.Unpublished (Value "memory",
	// "computeUnits"; the amd backend does).
	MemoryBytes  int64
	ComputeUnits int64 // SMs (NVIDIA) or CUs (AMD)
	// Engines counts fixed-function engines by name (copyEngines, decoders,
	// encoders, jpegDecoders, ofa); published as capacities where known.
	Engines map[string]int64

	PCIBusID string // extended BDF, lowercase: 0000:18:00.0
	PCIeRoot string // pci<domain>:<bus> of the root complex: pci0000:00
	// PCIeBridges are the bus IDs of the PCIe bridges between the root
	// complex and the GPU, root port first (its sysfs path): a PCIe
	// switch's up and down ports among them. Empty where unknown.
	PCIeBridges []string
	NUMANode    int // -1 when the device has no NUMA affinity

	// CardID is equal on GPUs that are dies of one physical card (the two
	// GCDs of an AMD MI250/MI250X) and empty on single-die GPUs; it is
	// published as the `cardID` attribute so a claim can keep both dies of
	// a card together (matchAttribute) or apart (distinctAttribute).
	CardID string

	// FabricDomain is equal on the GPUs of one multi-node NVLink domain
	// (GB200/GB300 NVL72 racks): "<fabric cluster UUID>.<clique ID>" as
	// NVML's fabric info reports them once the GPU is registered with the
	// fabric. Empty where the GPU is in no such domain (single-node NVLink
	// or NVSwitch systems report an all-zero cluster UUID), or where the
	// registration is not complete. Published as the `fabricDomain`
	// attribute (docs/design.md).
	FabricDomain string

	// Minor is the vendor's device minor: /dev/nvidia<Minor> for NVIDIA,
	// /dev/dri/card<Minor> for AMD.
	Minor int
	// RenderMinor is AMD's /dev/dri/renderD<RenderMinor>; unused for NVIDIA.
	RenderMinor int

	// Partitioning describes what the GPU can be cut into; nil when it cannot.
	Partitioning *Partitioning
	// Partitions are the partitions that exist now (static MIG instances,
	// AMD compute partitions of the current mode).
	Partitions []Partition

	// Health is the last known health of the GPU.
	Health Health

	// Simulated is true for a GPU of the sim backend: published as the
	// `simulated` attribute, so nobody mistakes it for hardware.
	Simulated bool

	// TimeSlice is the compute time-slice interval set on the GPU when it
	// is not the default, by backend.TimeSlice's name (Short, Medium,
	// Long). Empty: the default, or unknown where the backend cannot read
	// it back (nvml: NVML has no call for it).
	TimeSlice string
}

// Partitioning is a GPU's partition capability and current mode.
type Partitioning struct {
	Kind PartitionKind
	// Enabled reports whether partition mode is on now (MIG mode enabled).
	Enabled bool
	// ModeChangeNeedsReset is true where enabling or disabling the mode
	// requires a GPU reset (A100 class), false where it does not (Hopper+).
	ModeChangeNeedsReset bool
	// MemorySlices and ComputeSlices are the GPU's total slice counts
	// (MIG: 8 memory slices, 7 compute slices).
	MemorySlices  int
	ComputeSlices int
	// Profiles are what the GPU can be cut into. Where the vendor's
	// partitions are a mode of the whole GPU (gpuvendor.Capabilities'
	// PartitionModes: AMD's SPX, DPX, QPX, CPX), each profile is one mode,
	// its placements that mode's partitions, and only the modes the GPU
	// can be set to now are listed (AMD: available_compute_partition,
	// which follows the memory mode).
	Profiles []PartitionProfile
	// Mode is the mode the GPU is in now where its partitions are a
	// GPU-wide mode (the name of one of Profiles, or of a mode the GPU
	// cannot be set to now); "" elsewhere, and where it is unknown.
	Mode string
	// MemoryMode is the GPU's memory partition mode (AMD: NPS1, NPS4), ""
	// where it has none or it is unknown. A compute mode is available only
	// under the memory modes that allow it; the memory mode itself is an
	// operator's setting (a driver reload of every GPU in the hive).
	MemoryMode string
}

// Profile returns the profile named name, or nil if the table has none.
func (pt *Partitioning) Profile(name string) *PartitionProfile {
	for i := range pt.Profiles {
		if pt.Profiles[i].Name == name {
			return &pt.Profiles[i]
		}
	}
	return nil
}

// PartitionProfile is one entry of the vendor's partition profile table.
type PartitionProfile struct {
	Name          string // 1g.10gb, 1g.10gb+me, 3g.40gb
	MemoryBytes   int64
	ComputeUnits  int64 // SMs of an instance of this profile
	MemorySlices  int
	ComputeSlices int
	Engines       map[string]int64
	// MaxInstances caps how many partitions of this profile may exist on
	// one GPU where the placements alone do not (a 1g.10gb+me takes the
	// GPU's one OFA); 0 means no cap beyond the placements.
	MaxInstances int
	// Placements are the valid start slots, each occupying Size memory slices.
	Placements []Placement
}

// Placement is a slot range on the GPU's memory slices: [Start, Start+Size).
type Placement struct {
	Start int `json:"start"`
	Size  int `json:"size"`
}

// Overlaps reports whether two placements share a slice.
func (p Placement) Overlaps(o Placement) bool {
	return p.Start < o.Start+o.Size && o.Start < p.Start+p.Size
}

// Partition is an existing partition of a GPU.
type Partition struct {
	Kind      PartitionKind
	Profile   string
	Placement Placement
	UUID      string // MIG-<uuid> for MIG, unique id for AMD
	// GPUInstanceID and ComputeInstanceID identify a MIG instance on its parent.
	GPUInstanceID     int
	ComputeInstanceID int

	MemoryBytes  int64
	ComputeUnits int64
	Engines      map[string]int64

	// Minor and RenderMinor are an AMD partition's own device nodes; MIG
	// partitions use the parent's nodes plus capability nodes.
	Minor       int
	RenderMinor int
	// MemoryPartitionMode is AMD's NPS1/NPS4; empty elsewhere.
	MemoryPartitionMode string
}

// Link is one interconnect edge. A is a GPU index into Node.GPUs. For a
// switch link (NVSwitch) Switch names the switch plane and B is unused;
// otherwise B is the peer GPU index.
type Link struct {
	Kind          LinkKind
	A, B          int
	Switch        string
	BandwidthGBps int64 // unidirectional aggregate over the edge's links
	// BandwidthUnknown is set where the backend knows the link is there
	// but not how wide it is (KFD reports max_bandwidth 0 where the
	// kernel does not know the xGMI link count). BandwidthGBps is then 0
	// and means nothing: the fabricBandwidthGBps of both GPUs is left
	// out rather than published too low.
	BandwidthUnknown bool
}

// HealthState is a device's health.
type HealthState string

const (
	Healthy   HealthState = "Healthy"
	Unhealthy HealthState = "Unhealthy"
	Unknown   HealthState = "Unknown"
)

// Health is a device's health with the reason for the last change.
type Health struct {
	State  HealthState
	Reason string
	// Lost is set where the backend found the GPU fallen off the bus
	// (NVML ERROR_GPU_IS_LOST) but could still name it: published with a
	// NoExecute taint, so pods on it are evicted.
	Lost bool
}
