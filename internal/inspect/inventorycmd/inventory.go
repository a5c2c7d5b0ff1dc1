package inventorycmd

import "github.com/tessera-gpu/tessera/internal/inspect"

// Inventory is the fleet view of `kubectl tessera inventory`, also its
// -o json / -o yaml output.
type Inventory struct {
	Nodes []Node  `json:"nodes"`
	Fleet Summary `json:"fleet"`
}

// Node is one node's GPUs.
type Node struct {
	Name    string  `json:"name"`
	GPUs    []GPU   `json:"gpus"`
	Summary Summary `json:"summary"`
}

// GPU is one physical GPU.
type GPU struct {
	Node   string `json:"node"`
	Device string `json:"device"`
	// Published is false for a GPU published only as its partitions (MIG
	// mode on, static partitioning): its row is made from them.
	Published           bool   `json:"published"`
	Vendor              string `json:"vendor,omitempty"`
	Model               string `json:"model,omitempty"`
	ProductName         string `json:"productName,omitempty"`
	UUID                string `json:"uuid,omitempty"`
	MemoryBytes         int64  `json:"memoryBytes,omitempty"`
	Fabric              string `json:"fabric,omitempty"`
	FabricIsland        string `json:"fabricIsland,omitempty"`
	FabricBandwidthGBps int64  `json:"fabricBandwidthGBps,omitempty"`
	// FabricDomain is the GPU's multi-node NVLink domain, where it has one.
	FabricDomain  string `json:"fabricDomain,omitempty"`
	PCIBusID      string `json:"pciBusID,omitempty"`
	PCIeRoot      string `json:"pcieRoot,omitempty"`
	NUMANode      *int64 `json:"numaNode,omitempty"`
	Simulated     bool   `json:"simulated,omitempty"`
	Partitioning  string `json:"partitioning"`
	PartitionKind string `json:"partitionKind,omitempty"`
	// Mode is the compute partition mode a GPU whose partitions are a
	// mode (AMD: SPX, DPX, QPX, CPX) is in, as its whole device says.
	Mode   string          `json:"mode,omitempty"`
	Taints []inspect.Taint `json:"taints,omitempty"`
	// Shared is true for a device that allows multiple allocations
	// (--sharing=capacity); SharedMemory is then what its shares consume.
	Shared       bool   `json:"shared,omitempty"`
	SharedMemory *Usage `json:"sharedMemory,omitempty"`
	// Holders are the claims allocated the whole GPU.
	Holders []inspect.Holder `json:"holders,omitempty"`
	// MemorySlices counts the memory-slice counters of a dynamic GPU taken
	// by its allocated devices.
	MemorySlices *Usage `json:"memorySlices,omitempty"`
	// Partitions are the static partitions, or a dynamic GPU's allocated
	// placements only.
	Partitions []Partition `json:"partitions,omitempty"`
}

// Partition is a static partition or an allocated dynamic placement.
type Partition struct {
	Device       string           `json:"device"`
	Kind         string           `json:"kind,omitempty"`
	Profile      string           `json:"profile,omitempty"`
	UUID         string           `json:"uuid,omitempty"`
	MemoryBytes  int64            `json:"memoryBytes,omitempty"`
	MemorySlices []string         `json:"memorySlices,omitempty"`
	Taints       []inspect.Taint  `json:"taints,omitempty"`
	Shared       bool             `json:"shared,omitempty"`
	SharedMemory *Usage           `json:"sharedMemory,omitempty"`
	Holders      []inspect.Holder `json:"holders,omitempty"`
}

// Usage is used out of total: memory slices, or bytes of shared memory.
type Usage struct {
	Used  int64 `json:"used"`
	Total int64 `json:"total"`
}

// Summary counts GPUs on a node or in the fleet. A GPU is in use when any
// claim holds it or any part of it, free otherwise; unhealthy when it has a
// taint of effect NoSchedule or NoExecute.
type Summary struct {
	Nodes     int          `json:"nodes,omitempty"`
	GPUs      int          `json:"gpus"`
	Models    []ModelCount `json:"models"`
	Free      int          `json:"free"`
	InUse     int          `json:"inUse"`
	Unhealthy int          `json:"unhealthy"`
}

// ModelCount is how many GPUs of a model there are.
type ModelCount struct {
	Model string `json:"model"`
	Count int    `json:"count"`
}

// InUse says whether any claim holds the GPU or any part of it.
func (g *GPU) InUse() bool {
	if len(g.Holders) > 0 {
		return true
	}
	for _, p := range g.Partitions {
		if len(p.Holders) > 0 {
			return true
		}
	}
	return false
}

// Unhealthy says whether a taint keeps new claims off the GPU.
func (g *GPU) Unhealthy() bool {
	for _, t := range g.Taints {
		if t.Effect == "NoSchedule" || t.Effect == "NoExecute" {
			return true
		}
	}
	return false
}
