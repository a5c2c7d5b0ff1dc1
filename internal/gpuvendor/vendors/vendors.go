// Package vendors lists the vendors Tessera knows. It is apart from
// gpuvendor so that the vendor packages can import gpuvendor's types.
package vendors

import (
	"github.com/tessera-gpu/tessera/internal/gpuvendor"
	"github.com/tessera-gpu/tessera/internal/gpuvendor/amd"
	"github.com/tessera-gpu/tessera/internal/gpuvendor/nvidia"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// all is in a fixed order, new vendors last: the simulator numbers its
// device majors in this order.
var all = []gpuvendor.Vendor{nvidia.Vendor{}, amd.Vendor{}}

// All returns every known vendor, in a fixed order.
func All() []gpuvendor.Vendor { return all }

// For returns the vendor named name, false when Tessera does not know it.
func For(name inventory.Vendor) (gpuvendor.Vendor, bool) {
	for _, v := range all {
		if v.Name() == name {
			return v, true
		}
	}
	return nil, false
}

// Capabilities is For(name)'s capabilities; an unknown vendor can do
// nothing beyond time-slicing at its fixed interval.
func Capabilities(name inventory.Vendor) gpuvendor.Capabilities {
	if v, ok := For(name); ok {
		return v.Capabilities()
	}
	return gpuvendor.Capabilities{}
}
