//go:build cgo && linux

package nvml

import (
	"cmp"
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
// be read, or remembered from an earlier discovery, or the GPU cannot be
// published: without them it can be neither named nor allocated. A call
// that answers ERROR_GPU_IS_LOST marks the GPU lost (lost.go). Every other
// failure degrades the GPU: the value stays empty, the reason is kept, and
// the GPU is published Unhealthy, which the agent's health tracker turns
// into a NoSchedule taint (internal/health, Tracker.Discovered).
type gpuReader struct {
	b       *Backend
	h       nvml.Device
	g       *inventory.GPU
	reasons []string
	// lost is the first call that answered ERROR_GPU_IS_LOST.
	lost error
}

// degrade keeps err as a reason the GPU is Unhealthy; a lost GPU's errors
// are its loss, not more reasons.
func (r *gpuReader) degrade(err error) {
	if r.lostOn(err) {
		return
	}
	r.reasons = append(r.reasons, err.Error())
}

// lostOn records err if it is ERROR_GPU_IS_LOST and reports whether it was.
func (r *gpuReader) lostOn(err error) bool {
	if !is(err, nvml.ERROR_GPU_IS_LOST) {
		return false
	}
	if r.lost == nil {
		r.lost = err
	}
	return true
}

// readGPU reads the GPU at NVML index i. It fails only when the GPU cannot
// be named (errUnnamed, lost.go); a GPU that is lost but named is returned
// with Health.Lost set.
func (b *Backend) readGPU(i int, h nvml.Device, driver string) (*inventory.GPU, error) {
	g := &inventory.GPU{Vendor: inventory.VendorNVIDIA, NUMANode: -1}
	r := &gpuReader{b: b, h: h, g: g}
	if err := r.identity(i); err != nil {
		return nil, err
	}
	g.DriverVersion = driverSemver(driver)
	for _, read := range []func(){r.name, r.architecture, r.computeCapability, r.memory, r.computeUnits, r.minor, r.pcie, r.fabric, r.mig, r.brand} {
		if r.lost != nil {
			break // every further call would say the same
		}
		read()
	}
	switch {
	case r.lost != nil:
		g.Health = inventory.Health{State: inventory.Unhealthy, Lost: true, Reason: "GPU is lost: " + r.lost.Error()}
	case len(r.reasons) > 0:
		g.Health = inventory.Health{State: inventory.Unhealthy, Reason: strings.Join(r.reasons, "; ")}
	default:
		g.Health = inventory.Health{State: inventory.Healthy}
	}
	b.sayHealth(g)
	return g, nil
}

// identity reads the UUID and PCI bus ID, or takes the ones remembered for
// index i when the GPU answers ERROR_GPU_IS_LOST.
func (r *gpuReader) identity(i int) error {
	uuid, ret := r.h.GetUUID()
	err := check("nvmlDeviceGetUUID", ret)
	var bdf string
	if err == nil {
		var pci nvml.PciInfo
		pci, ret = r.h.GetPciInfo()
		err = check("nvmlDeviceGetPciInfo", ret)
		if err == nil {
			bdf, err = normalizeBusID(cString(pci.BusId[:]))
		}
	}
	if err != nil && r.lostOn(err) {
		id, ok := r.b.remembered(i)
		if !ok {
			return &unnamedError{index: i, err: err}
		}
		uuid, bdf, err = id.uuid, id.bdf, nil
	}
	if err != nil {
		return fmt.Errorf("GPU %s: %w", cmp.Or(uuid, fmt.Sprintf("at NVML index %d", i)), err)
	}
	r.g.UUID, r.g.PCIBusID = uuid, bdf
	r.b.remember(i, identity{uuid: uuid, bdf: bdf})
	return nil
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
// handles only, so for a whole GPU it answers NOT_SUPPORTED. Then the SM
// count is derived: nvmlDeviceGetNumGpuCores (CUDA cores) divided by the
// cores per SM of the GPU's compute capability. Unknown is not zero: where
// neither answers (NOT_SUPPORTED, or no cores-per-SM entry for a newer
// GPU) the count is left out and the computeUnits capacity with it. That
// is an answer, not a fault: the GPU stays healthy. Only a call that fails
// otherwise degrades it.
func (r *gpuReader) computeUnits() {
	if a, ret := r.h.GetAttributes(); ret == nvml.SUCCESS && a.MultiprocessorCount > 0 {
		r.g.ComputeUnits = int64(a.MultiprocessorCount)
		return
	}
	cores, ret := r.h.GetNumGpuCores()
	err := check("nvmlDeviceGetNumGpuCores", ret)
	if notSupported(err) {
		r.b.logger.V(2).Info("SM count not reported by NVML; computeUnits left out", "uuid", r.g.UUID, "err", err)
		return
	}
	if err != nil {
		r.degrade(fmt.Errorf("SM count: %w", err))
		return
	}
	major, minor, ret := r.h.GetCudaComputeCapability()
	per, ok := fp32CoresPerSM[[2]int{major, minor}]
	if ret != nvml.SUCCESS || !ok || cores <= 0 || cores%per != 0 {
		r.b.logger.V(2).Info("SM count cannot be derived; computeUnits left out", "uuid", r.g.UUID,
			"cores", cores, "computeCapability", fmt.Sprintf("%d.%d", major, minor))
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

// pcie reads the root complex, the bridges to it and the NUMA node from
// sysfs (NVML has none of them in a form the schema uses).
func (r *gpuReader) pcie() {
	root, bridges, err := r.b.sys.pcieChain(r.g.PCIBusID)
	if err != nil {
		// Not a GPU fault: the attribute is left out and the GPU stays healthy.
		r.b.logger.Info("PCIe root unknown; attribute left out", "uuid", r.g.UUID, "err", err)
	}
	r.g.PCIeRoot, r.g.PCIeBridges = root, bridges
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
