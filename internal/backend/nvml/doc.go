// Package nvml is Tessera's NVIDIA backend. It discovers GPUs, MIG
// instances and NVLink/NVSwitch topology through NVML (github.com/NVIDIA/go-nvml)
// and fills the vendor-neutral inventory that internal/publish publishes.
//
// It is the only package of the project that imports go-nvml, which needs
// cgo. Every file that imports it is built only with cgo on linux; without
// cgo the package still compiles (nocgo.go) and New returns an error that
// says how to build it, so `CGO_ENABLED=0 go build ./...` keeps working.
//
// Files with one job each:
//
//	backend.go   the Backend: one long-lived NVML session, cached handles
//	detect.go    Detect, for --backend=auto
//	gpu.go       whole-GPU values (identity, versions, memory, SMs, PCI)
//	lost.go      lost GPUs at discovery, GPUs not published, said once
//	fabric.go    fabric info -> fabricDomain (rule: gpuvendor/nvidia)
//	nvlink.go    per-link NVLink state -> NVSwitch planes and direct edges
//	linkspeed.go link bandwidth: the speed field, else the nominal table
//	links_sort.go a stable link order (pure)
//	nocgo.go     the !cgo stand-in: New and Detect say a cgo build is needed
//	mig.go       MIG mode, profile/placement table, existing instances
//	migchange.go what the MIG changes share: the GPU by UUID, read as Discover does
//	carve.go     CreatePartition: GI + full-size CI, rolled back on failure
//	destroy.go   DestroyPartition: CI, then its GI
//	migmode.go   SetPartitionMode: never a GPU reset, no pending change left
//	stray.go     DestroyStray: GPU instances left without a compute instance
//	sharing.go   backend.Sharer: nvidia-smi compute-policy, MPS daemons (internal/mps)
//	generation.go Generation: this agent's changes and MIG state made by hand
//	health.go    WatchHealth: one loop of event waits and counter polls
//	health_events.go the NVML event set: XID and ECC events, MIG attribution
//	health_gpu.go one GPU's health: the probe, lost and recovered
//	health_counters.go polled counters: ECC totals, row remaps, retired pages
//	profile.go   nvidia-smi style MIG profile names (pure)
//	model.go     product name -> short model (pure)
//	pci.go       PCI bus ID normalisation (pure)
//	sysfs.go     PCIe root and NUMA node from sysfs (pure)
//	version.go   driver / CUDA version strings (pure)
//	returns.go   NVML return codes -> wrapped errors
package nvml
