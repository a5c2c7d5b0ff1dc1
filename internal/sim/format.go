package sim

// This file holds the raw shape of a machine file, exactly as written by a
// human. Nothing here is validated: decode.go fills these structs strictly
// (unknown fields are errors) and build.go checks and expands them into a
// Machine. Optional fields whose absence matters are pointers.

// fileMachine is a whole machine file.
type fileMachine struct {
	// Name is the machine's stable name; it seeds the derived UUIDs.
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	// DriverVersion is the default driver version, as the driver reports it
	// (580.65.06); gpuTypes and gpus entries may override it.
	DriverVersion string `yaml:"driverVersion"`
	// ProfileTables are partition profile tables, referenced by name from
	// gpuTypes.*.partitioning.profiles so that GPU types can share them.
	ProfileTables map[string][]fileProfile `yaml:"profileTables"`
	// GPUTypes holds the per-model spec referenced by gpus[*].type.
	GPUTypes map[string]fileGPUType `yaml:"gpuTypes"`
	GPUs     []fileGPU              `yaml:"gpus"`
	Links    fileLinks              `yaml:"links"`
	// Cgroup is the node's cgroup hierarchy; absent: v2 without dmem.
	Cgroup *fileCgroup `yaml:"cgroup"`
	// IOMMU says whether the node's IOMMU is on (VT-d, AMD-Vi); absent:
	// on. Without it nothing can be passed through (iommu.go).
	IOMMU *bool `yaml:"iommu"`
	// PCIDevices are PCI functions besides the GPUs and their bridges,
	// listed where they share a GPU's IOMMU group (a NIC behind the same
	// switch), which makes that group impossible to pass.
	PCIDevices []filePCIDevice `yaml:"pciDevices"`
}

// filePCIDevice is one PCI function that is not a GPU.
type filePCIDevice struct {
	PCIBusID string `yaml:"pciBusID"`
	// Class is the 24-bit PCI class code in hex (0x020000: Ethernet).
	Class  string `yaml:"class"`
	Vendor string `yaml:"vendor"` // PCI vendor ID in hex (0x15b3)
	Driver string `yaml:"driver"` // the driver it is bound to at boot
	// IOMMUGroup is required: the point of listing the device.
	IOMMUGroup *int   `yaml:"iommuGroup"`
	PCIeRoot   string `yaml:"pcieRoot"`
}

// fileCgroup is what the node's kernel offers for device memory limits.
type fileCgroup struct {
	Version int  `yaml:"version"` // 1 or 2
	Dmem    bool `yaml:"dmem"`    // the dmem controller (v2 only)
}

// fileGPUType is everything GPUs of one model share.
type fileGPUType struct {
	Vendor            string            `yaml:"vendor"`
	Model             string            `yaml:"model"`
	ProductName       string            `yaml:"productName"`
	Architecture      string            `yaml:"architecture"`
	DriverVersion     string            `yaml:"driverVersion"`
	ComputeCapability string            `yaml:"computeCapability"`
	GFXVersion        string            `yaml:"gfxVersion"`
	Memory            string            `yaml:"memory"`
	ComputeUnits      int64             `yaml:"computeUnits"`
	Engines           map[string]int64  `yaml:"engines"`
	Partitioning      *filePartitioning `yaml:"partitioning"`
}

// filePartitioning is a GPU type's partition capability.
type filePartitioning struct {
	Kind                 string `yaml:"kind"`
	Enabled              bool   `yaml:"enabled"`
	ModeChangeNeedsReset bool   `yaml:"modeChangeNeedsReset"`
	MemorySlices         int    `yaml:"memorySlices"`
	ComputeSlices        int    `yaml:"computeSlices"`
	// Profiles names an entry of profileTables.
	Profiles string `yaml:"profiles"`
	// MemoryMode, ComputeModes and ModeChangeTime are for partitions that
	// are a GPU-wide mode (xcp): the memory partition mode at power-on
	// (NPS1), the compute modes each memory mode allows (the profiles of
	// the table the GPU can be set to under it; all of them when left out),
	// and how long the driver takes to enumerate a new mode's partitions
	// after its mode is set (a Go duration, 0 when left out).
	MemoryMode     string              `yaml:"memoryMode"`
	ComputeModes   map[string][]string `yaml:"computeModes"`
	ModeChangeTime string              `yaml:"modeChangeTime"`
}

// fileProfile is one row of a partition profile table.
type fileProfile struct {
	Name          string           `yaml:"name"`
	Memory        string           `yaml:"memory"`
	ComputeUnits  int64            `yaml:"computeUnits"`
	MemorySlices  int              `yaml:"memorySlices"`
	ComputeSlices int              `yaml:"computeSlices"`
	Engines       map[string]int64 `yaml:"engines"`
	// Placements are the valid start slots; each placement is MemorySlices
	// wide, as nvidia-smi mig -lgipp prints them ({0,2,4,6}:2).
	Placements []int `yaml:"placements"`
	// MaxInstances caps how many partitions of this profile may exist at
	// once where placements alone do not (1g.10gb+me: one per GPU).
	MaxInstances int `yaml:"maxInstances"`
}

// fileGPU is one entry of gpus: one GPU, or Count identical ones.
type fileGPU struct {
	Type  string `yaml:"type"`
	Count *int   `yaml:"count"`

	UUID     string `yaml:"uuid"`
	PCIBusID string `yaml:"pciBusID"`
	PCIeRoot string `yaml:"pcieRoot"`
	// PCIeBridges are the bridges from the root port down to the GPU.
	PCIeBridges   []string `yaml:"pcieBridges"`
	NUMANode      *int     `yaml:"numaNode"`
	Minor         *int     `yaml:"minor"`
	RenderMinor   *int     `yaml:"renderMinor"`
	DriverVersion string   `yaml:"driverVersion"`
	// IOMMUGroup is the GPU's IOMMU group; absent: one of its own.
	// GPUs given the same number share a group (a switch without ACS).
	IOMMUGroup *int `yaml:"iommuGroup"`
	// PartitioningEnabled overrides gpuTypes.*.partitioning.enabled.
	PartitioningEnabled *bool           `yaml:"partitioningEnabled"`
	Partitions          []filePartition `yaml:"partitions"`
}

// filePartition is a partition that exists when the machine powers on.
type filePartition struct {
	Profile string `yaml:"profile"`
	Start   *int   `yaml:"start"`
}

// fileLinks are the interconnects; GPU numbers are indices into the GPU
// list after count expansion.
type fileLinks struct {
	NVSwitch []fileSwitchPlane `yaml:"nvswitch"`
	NVLink   []filePair        `yaml:"nvlink"`
	XGMI     []fileMesh        `yaml:"xgmi"`
	PCIe     []filePair        `yaml:"pcie"`
}

// fileSwitchPlane is one NVSwitch fabric; every listed GPU (all when GPUs
// is empty) reaches every other through it.
type fileSwitchPlane struct {
	Plane         string `yaml:"plane"`
	GPUs          []int  `yaml:"gpus"`
	BandwidthGBps int64  `yaml:"bandwidthGBps"`
	// Fabric, where set, is the multi-node NVLink domain the plane's
	// switches belong to (a GB200 NVL72 rack), as NVML's fabric info
	// reports it on each GPU; absent on single-node NVSwitch systems.
	Fabric *fileFabric `yaml:"fabric"`
}

// fileFabric is NVML's GPU fabric info of a registered GPU.
type fileFabric struct {
	ClusterUUID string `yaml:"clusterUUID"`
	CliqueID    *int64 `yaml:"cliqueID"`
}

// filePair is one direct GPU-to-GPU edge.
type filePair struct {
	A             *int  `yaml:"a"`
	B             *int  `yaml:"b"`
	BandwidthGBps int64 `yaml:"bandwidthGBps"`
}

// fileMesh is a full mesh: one edge between every two listed GPUs (all
// when GPUs is empty).
type fileMesh struct {
	GPUs          []int `yaml:"gpus"`
	BandwidthGBps int64 `yaml:"bandwidthGBps"`
}
