package inspect

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/deviceattribute"

	"github.com/tessera-gpu/tessera/pkg/publish"
)

// Attribute and capacity names beyond pkg/publish's schema.
const (
	attrPCIBusID = string(deviceattribute.StandardDeviceAttributePCIBusID)
	attrPCIeRoot = string(deviceattribute.StandardDeviceAttributePCIeRoot)
	attrNUMANode = string(deviceattribute.StandardDeviceAttributeNUMANode)
)

// lookup finds a driver attribute by its short name, published unqualified
// ("model", as this driver does: the domain is the driver name) or qualified
// ("gpu.tessera.dev/model"). Names that carry a domain (the standard
// resource.kubernetes.io ones) are looked up as given.
func lookup[V any](m map[resourceapi.QualifiedName]V, name string) (V, bool) {
	if v, ok := m[resourceapi.QualifiedName(name)]; ok {
		return v, true
	}
	v, ok := m[resourceapi.QualifiedName(DriverName+"/"+name)]
	return v, ok
}

func attrString(d *resourceapi.Device, name string) string {
	if a, ok := lookup(d.Attributes, name); ok {
		switch {
		case a.StringValue != nil:
			return *a.StringValue
		case a.VersionValue != nil:
			return *a.VersionValue
		}
	}
	return ""
}

// attrInt returns the integer attribute and whether it is published.
func attrInt(d *resourceapi.Device, name string) (int64, bool) {
	if a, ok := lookup(d.Attributes, name); ok && a.IntValue != nil {
		return *a.IntValue, true
	}
	return 0, false
}

func attrBool(d *resourceapi.Device, name string) bool {
	a, ok := lookup(d.Attributes, name)
	return ok && a.BoolValue != nil && *a.BoolValue
}

// capacityBytes is the device's memory capacity, 0 when unpublished.
func capacityBytes(d *resourceapi.Device) int64 {
	if c, ok := lookup(d.Capacity, publish.CapMemory); ok {
		return c.Value.Value()
	}
	return 0
}

func isSimulated(d *resourceapi.Device) bool { return attrBool(d, publish.AttrSimulated) }

func isShared(d *resourceapi.Device) bool {
	return d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations
}
