package inspect

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/deviceattribute"

	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// Attribute and capacity names beyond internal/publish's schema.
const (
	AttrPCIBusID = string(deviceattribute.StandardDeviceAttributePCIBusID)
	AttrPCIeRoot = string(deviceattribute.StandardDeviceAttributePCIeRoot)
	AttrNUMANode = string(deviceattribute.StandardDeviceAttributeNUMANode)
)

// Lookup finds a driver attribute by its short name, published unqualified
// ("model", as this driver does: the domain is the driver name) or qualified
// ("gpu.tessera.dev/model"). Names that carry a domain (the standard
// resource.kubernetes.io ones) are looked up as given.
func Lookup[V any](m map[resourceapi.QualifiedName]V, name string) (V, bool) {
	if v, ok := m[resourceapi.QualifiedName(name)]; ok {
		return v, true
	}
	v, ok := m[resourceapi.QualifiedName(names.DriverName+"/"+name)]
	return v, ok
}

// AttrString is a string (or version) attribute, "" when unpublished.
func AttrString(d *resourceapi.Device, name string) string {
	if a, ok := Lookup(d.Attributes, name); ok {
		switch {
		case a.StringValue != nil:
			return *a.StringValue
		case a.VersionValue != nil:
			return *a.VersionValue
		}
	}
	return ""
}

// AttrInt returns the integer attribute and whether it is published.
func AttrInt(d *resourceapi.Device, name string) (int64, bool) {
	if a, ok := Lookup(d.Attributes, name); ok && a.IntValue != nil {
		return *a.IntValue, true
	}
	return 0, false
}

// AttrBool says whether a bool attribute is published true.
func AttrBool(d *resourceapi.Device, name string) bool {
	a, ok := Lookup(d.Attributes, name)
	return ok && a.BoolValue != nil && *a.BoolValue
}

// CapacityBytes is the device's memory capacity, 0 when unpublished.
func CapacityBytes(d *resourceapi.Device) int64 {
	if c, ok := Lookup(d.Capacity, publish.CapMemory); ok {
		return c.Value.Value()
	}
	return 0
}

// IsSimulated says whether the device is the simulator's.
func IsSimulated(d *resourceapi.Device) bool { return AttrBool(d, publish.AttrSimulated) }

// IsShared says whether the device allows multiple allocations.
func IsShared(d *resourceapi.Device) bool {
	return d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations
}
