package publish

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/deviceattribute"

	"github.com/tessera-gpu/tessera/internal/fabric"
	"github.com/tessera-gpu/tessera/internal/gpuvendor/vendors"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// Attribute names of the schema in docs/design.md (domain gpu.tessera.dev,
// which is the driver name, so CEL reaches them unqualified).
const (
	AttrType              = "type"
	AttrVendor            = "vendor"
	AttrModel             = "model"
	AttrProductName       = "productName"
	AttrArchitecture      = "architecture"
	AttrDriverVersion     = "driverVersion"
	AttrUUID              = "uuid"
	AttrCUDACC            = "cudaComputeCapability"
	AttrGFXVersion        = "gfxVersion"
	AttrFabric            = "fabric"
	AttrFabricIsland      = "fabricIsland"
	AttrFabricBandwidth   = "fabricBandwidthGBps"
	AttrFabricDomain      = "fabricDomain"
	AttrProfile           = "profile"
	AttrParentUUID        = "parentUUID"
	AttrPartitionKind     = "partitionKind"
	AttrMemoryPartition   = "memoryPartitionMode"
	AttrCardID            = "cardID"
	AttrSimulated         = "simulated"
	AttrMemoryIsolation   = "memoryIsolation"
	AttrMPSNamespace      = "mpsNamespace"
	AttrIOMMUGroup        = "iommuGroup"
	CapMemory             = "memory"
	CapComputeUnits       = "computeUnits"
	TypeGPU               = "gpu"
	TypePartition         = "partition"
	maxAttributeStringLen = 64
)

type attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute

func (a attrs) str(name resourceapi.QualifiedName, v string) {
	if v == "" {
		return
	}
	if len(v) > maxAttributeStringLen {
		v = v[:maxAttributeStringLen]
	}
	a[name] = resourceapi.DeviceAttribute{StringValue: &v}
}

func (a attrs) boolean(name resourceapi.QualifiedName, v bool) {
	a[name] = resourceapi.DeviceAttribute{BoolValue: &v}
}

func (a attrs) integer(name resourceapi.QualifiedName, v int64) {
	a[name] = resourceapi.DeviceAttribute{IntValue: &v}
}

// version publishes v as a semantic version, padding "9.0" to "9.0.0" and
// dropping leading zeros ("580.65.06" -> "580.65.6") so CEL semver() works.
func (a attrs) version(name resourceapi.QualifiedName, v string) error {
	if v == "" {
		return nil
	}
	sv, err := Semver(v)
	if err != nil {
		return fmt.Errorf("attribute %s: %w", name, err)
	}
	a[name] = resourceapi.DeviceAttribute{VersionValue: &sv}
	return nil
}

// Semver normalises a dotted version of up to three numeric parts.
func Semver(v string) (string, error) {
	parts := strings.Split(v, ".")
	if len(parts) > 3 {
		return "", fmt.Errorf("version %q has more than three parts", v)
	}
	for len(parts) < 3 {
		parts = append(parts, "0")
	}
	for i, p := range parts {
		if p == "" {
			return "", fmt.Errorf("version %q has an empty part", v)
		}
		for _, r := range p {
			if r < '0' || r > '9' {
				return "", fmt.Errorf("version %q is not numeric", v)
			}
		}
		p = strings.TrimLeft(p, "0")
		if p == "" {
			p = "0"
		}
		parts[i] = p
	}
	return strings.Join(parts, "."), nil
}

// gpuAttributes are the attributes every device of GPU g carries.
func gpuAttributes(g *inventory.GPU, f fabric.Attrs) (attrs, error) {
	a := attrs{}
	a.str(AttrVendor, string(g.Vendor))
	a.str(AttrModel, g.Model)
	a.str(AttrProductName, g.ProductName)
	a.str(AttrArchitecture, g.Architecture)
	if err := a.version(AttrDriverVersion, g.DriverVersion); err != nil {
		return nil, err
	}
	if err := a.version(AttrCUDACC, g.ComputeCapability); err != nil {
		return nil, err
	}
	if err := a.version(AttrGFXVersion, g.GFXVersion); err != nil {
		return nil, err
	}
	a.str(AttrFabric, string(f.Kind))
	a.str(AttrFabricIsland, f.Island)
	a.str(AttrFabricDomain, g.FabricDomain)
	a.str(AttrCardID, g.CardID)
	if g.Simulated {
		// Only on simulated devices: hardware carries no such attribute,
		// so a production class can refuse them (docs/design.md).
		a.boolean(AttrSimulated, true)
	}
	if !f.BandwidthUnknown {
		// Unknown is left out, not 0: a selector fabricBandwidthGBps > 0
		// must not turn away a fully linked GPU whose link widths the
		// driver does not report (docs/claims.md).
		a.integer(AttrFabricBandwidth, f.BandwidthGBps)
	}
	if g.PCIeRoot != "" {
		a.str(deviceattribute.StandardDeviceAttributePCIeRoot, g.PCIeRoot)
	}
	if g.NUMANode >= 0 {
		a.integer(deviceattribute.StandardDeviceAttributeNUMANode, int64(g.NUMANode))
	}
	return a, nil
}

func wholeGPUDevice(name string, g *inventory.GPU, f fabric.Attrs) (resourceapi.Device, error) {
	a, err := gpuAttributes(g, f)
	if err != nil {
		return resourceapi.Device{}, err
	}
	a.str(AttrType, TypeGPU)
	a.str(AttrUUID, g.UUID)
	if g.PCIBusID != "" {
		a.str(deviceattribute.StandardDeviceAttributePCIBusID, g.PCIBusID)
	}
	return resourceapi.Device{
		Name:       name,
		Attributes: a,
		Capacity:   capacities(g.MemoryBytes, g.ComputeUnits, g.Engines),
	}, nil
}

func partitionDevice(name string, g *inventory.GPU, p *inventory.Partition, f fabric.Attrs) (resourceapi.Device, error) {
	peerLinks := vendors.Capabilities(g.Vendor).PartitionPeerLinks
	if !peerLinks {
		// A partition without a peer-to-peer path to other GPUs (MIG) is
		// its own island rather than a member of the parent's.
		// An uncarved placement (dynamic partitioning) has no UUID yet.
		seed := p.UUID
		if seed == "" {
			seed = g.UUID + "/" + name
		}
		sum := sha256.Sum256([]byte(seed))
		f = fabric.Attrs{Kind: inventory.LinkPCIe, Island: "pcie-" + hex.EncodeToString(sum[:6])}
	}
	a, err := gpuAttributes(g, f)
	if err != nil {
		return resourceapi.Device{}, err
	}
	if !peerLinks {
		// No NVLink from a MIG instance (above), so no multi-node NVLink
		// domain either.
		delete(a, AttrFabricDomain)
	}
	a.str(AttrType, TypePartition)
	a.str(AttrUUID, p.UUID)
	a.str(AttrParentUUID, g.UUID)
	a.str(AttrProfile, p.Profile)
	a.str(AttrPartitionKind, string(p.Kind))
	a.str(AttrMemoryPartition, p.MemoryPartitionMode)
	return resourceapi.Device{
		Name:       name,
		Attributes: a,
		Capacity:   capacities(p.MemoryBytes, p.ComputeUnits, p.Engines),
	}, nil
}

// capacities are a device's capacities. Unknown is not zero: a backend
// leaves memory or compute units at 0 where the hardware did not say (the
// nvml backend where NVML reports no SM count, a lost GPU's memory), and a
// capacity of 0 would tell the scheduler the device has none, so it is
// left out instead. Engine counts are published as reported (0 encoders
// is a fact of an H100).
func capacities(mem, cu int64, engines map[string]int64) map[resourceapi.QualifiedName]resourceapi.DeviceCapacity {
	c := map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{}
	if mem > 0 {
		c[CapMemory] = resourceapi.DeviceCapacity{Value: *resource.NewQuantity(mem, resource.BinarySI)}
	}
	if cu > 0 {
		c[CapComputeUnits] = resourceapi.DeviceCapacity{Value: *resource.NewQuantity(cu, resource.DecimalSI)}
	}
	for name, n := range engines {
		c[resourceapi.QualifiedName(name)] = resourceapi.DeviceCapacity{Value: *resource.NewQuantity(n, resource.DecimalSI)}
	}
	return c
}
