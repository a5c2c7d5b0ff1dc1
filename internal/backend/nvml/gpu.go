//go:build cgo && linux

package nvml

import (
	"fmt"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// architectures maps NVML's architecture enum to the schema's lowercase word.
var architectures = map[nvml.DeviceArchitecture]string{
	nvml.DEVICE_ARCH_KEPLER:    "kepler",
	nvml.DEVICE_ARCH_MAXWELL:   "maxwell",
	nvml.DEVICE_ARCH_PASCAL:    "pascal",
	nvml.DEVICE_ARCH_VOLTA:     "volta",
	nvml.DEVICE_ARCH_TURING:    "turing",
	nvml.DEVICE_ARCH_AMPERE:    "ampere",
	nvml.DEVICE_ARCH_ADA:       "ada",
	nvml.DEVICE_ARCH_HOPPER:    "hopper",
	nvml.DEVICE_ARCH_BLACKWELL: "blackwell",
	nvml.DEVICE_ARCH_RUBIN:     "rubin",
}

// fp32CoresPerSM is CUDA cores per SM by compute capability major.minor
// (CUDA C++ Programming Guide, "Compute Capabilities", arithmetic
// instruction throughput table: 64 for 7.x and 8.0, 128 for 8.6, 8.7, 8.9,
// 9.0, 10.x and 12.x). Used only to derive SMs where NVML will not say.
var fp32CoresPerSM = map[[2]int]int{
	{7, 0}: 64, {7, 2}: 64, {7, 5}: 64,
	{8, 0}: 64, {8, 6}: 128, {8, 7}: 128, {8, 9}: 128,
	{9, 0}: 128, {10, 0}: 128, {10, 3}: 128, {12, 0}: 128,
}

// gpuReader collects one GPU's values. Identity (UUID, PCI bus ID) must
// succeed or the GPU is dropped: without them it can be neither named nor
// allocated. Every other failure degrades the GPU: the value stays empty,
// the reason is kept, and the GPU is published Unhealthy so the agent
// taints it.
type gpuReader struct {
	b       *Backend
	h       nvml.Device
	g       *inventory.GPU
	reasons []string
}

func (r *gpuReader) degrade(err error) {
	r.reasons = append(r.reasons, err.Error())
}

func (b *Backend) readGPU(h nvml.Device, driver string) (*inventory.GPU, error) {
	g := &inventory.GPU{Vendor: inventory.VendorNVIDIA, NUMANode: -1}
	r := &gpuReader{b: b, h: h, g: g}

	uuid, ret := h.GetUUID()
	if err := check("nvmlDeviceGetUUID", ret); err != nil {
		return nil, err
	}
	g.UUID = uuid
	pci, ret := h.GetPciInfo()
	if err := check("nvmlDeviceGetPciInfo", ret); err != nil {
		return nil, fmt.Errorf("GPU %s: %w", uuid, err)
	}
	bdf, err := normalizeBusID(cString(pci.BusId[:]))
	if err != nil {
		return nil, fmt.Errorf("GPU %s: %w", uuid, err)
	}
	g.PCIBusID = bdf

	g.DriverVersion = driverSemver(driver)
	r.name()
	r.architecture()
	r.computeCapability()
	r.memory()
	r.computeUnits()
	r.minor()
	r.pcie()
	r.mig()
	r.brand()

	g.Health = inventory.Health{State: inventory.Healthy}
	if len(r.reasons) > 0 {
		g.Health = inventory.Health{State: inventory.Unhealthy, Reason: strings.Join(r.reasons, "; ")}
		b.logger.Error(nil, "GPU degraded", "uuid", uuid, "pciBusID", bdf, "reason", g.Health.Reason)
	}
	return g, nil
}

func (r *gpuReader) name() {
	name, ret := r.h.GetName()
	if err := check("nvmlDeviceGetName", ret); err != nil {
		r.degrade(err)
		return
	}
	r.g.ProductName = name
	// Derived: the short model comes from the product name (model.go).
	r.g.Model = modelFromProductName(name)
}

func (r *gpuReader) architecture() {
	a, ret := r.h.GetArchitecture()
	if err := check("nvmlDeviceGetArchitecture", ret); err != nil {
		r.degrade(err)
		return
	}
	if s, ok := architectures[a]; ok {
		r.g.Architecture = s
		return
	}
	// A newer GPU than this table: publish no architecture rather than a guess.
	r.b.logger.Info("unknown NVML architecture; attribute left out", "uuid", r.g.UUID, "architecture", uint32(a))
}

func (r *gpuReader) computeCapability() {
	major, minor, ret := r.h.GetCudaComputeCapability()
	if err := check("nvmlDeviceGetCudaComputeCapability", ret); err != nil {
		r.degrade(err)
		return
	}
	r.g.ComputeCapability = computeCapability(major, minor)
}

func (r *gpuReader) memory() {
	m, ret := r.h.GetMemoryInfo()
	if err := check("nvmlDeviceGetMemoryInfo", ret); err != nil {
		r.degrade(err)
		return
	}
	// Total framebuffer as nvidia-smi's "FB Memory Usage: Total".
	r.g.MemoryBytes = int64(m.Total)
}

// computeUnits: NVML documents nvmlDeviceGetAttributes for MIG device
// handles only, so for a whole GPU it usually answers NOT_SUPPORTED. Then
// the SM count is derived: nvmlDeviceGetNumGpuCores (CUDA cores) divided by
// the cores per SM of the GPU's compute capability.
func (r *gpuReader) computeUnits() {
	if a, ret := r.h.GetAttributes(); ret == nvml.SUCCESS && a.MultiprocessorCount > 0 {
		r.g.ComputeUnits = int64(a.MultiprocessorCount)
		return
	}
	cores, ret := r.h.GetNumGpuCores()
	if err := check("nvmlDeviceGetNumGpuCores", ret); err != nil {
		r.degrade(fmt.Errorf("SM count: %w", err))
		return
	}
	major, minor, ret := r.h.GetCudaComputeCapability()
	per, ok := fp32CoresPerSM[[2]int{major, minor}]
	if ret != nvml.SUCCESS || !ok || cores%per != 0 {
		r.degrade(fmt.Errorf("SM count: cannot derive from %d cores at compute capability %d.%d", cores, major, minor))
		return
	}
	r.g.ComputeUnits = int64(cores / per)
}

func (r *gpuReader) minor() {
	m, ret := r.h.GetMinorNumber()
	if err := check("nvmlDeviceGetMinorNumber", ret); err != nil {
		// Without the minor there is no /dev/nvidia<minor> to hand out.
		r.degrade(err)
		r.g.Minor = -1
		return
	}
	r.g.Minor = m
}

// pcie reads the root complex and NUMA node from sysfs (NVML has neither
// in a form the schema uses).
func (r *gpuReader) pcie() {
	root, err := r.b.sys.pcieRoot(r.g.PCIBusID)
	if err != nil {
		// Not a GPU fault: the attribute is left out and the GPU stays healthy.
		r.b.logger.Info("PCIe root unknown; attribute left out", "uuid", r.g.UUID, "err", err)
	}
	r.g.PCIeRoot = root
	numa, err := r.b.sys.numaNode(r.g.PCIBusID)
	if err != nil {
		r.b.logger.Info("NUMA node unknown; attribute left out", "uuid", r.g.UUID, "err", err)
	}
	r.g.NUMANode = numa
}

// brand has no inventory field; it is logged once per discovery at high
// verbosity so an operator can see what NVML said.
func (r *gpuReader) brand() {
	if br, ret := r.h.GetBrand(); ret == nvml.SUCCESS {
		r.b.logger.V(4).Info("GPU", "uuid", r.g.UUID, "product", r.g.ProductName, "brand", uint32(br))
	}
}
