package cdi

import (
	"fmt"
	"strings"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/tessera-gpu/tessera/internal/gpuvendor"
	"github.com/tessera-gpu/tessera/internal/gpuvendor/vendors"
)

// vendorIndex maps the node's GPUs and partitions to the devices of their
// vendors' own node-wide specs (gpuvendor.OwnSpec), loaded fresh for each
// claim (a driver upgrade regenerates the spec).
type vendorIndex struct {
	byUUID map[string]string // kind -> device name, where the name is a UUID
	byKey  map[string]string // kind + " " + OwnSpec key -> device name
}

func loadVendorIndex(dirs []string) (*vendorIndex, error) {
	if len(dirs) == 0 {
		return nil, nil
	}
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(dirs...), cdiapi.WithAutoRefresh(false))
	if err != nil {
		return nil, fmt.Errorf("read vendor CDI specs in %v: %w", dirs, err)
	}
	ix := &vendorIndex{byUUID: map[string]string{}, byKey: map[string]string{}}
	for _, v := range vendors.All() {
		own := v.OwnSpec()
		if own == nil {
			continue
		}
		vendor, class, _ := strings.Cut(own.Kind(), "/")
		for _, spec := range cache.GetVendorSpecs(vendor) {
			if spec.GetClass() != class {
				continue
			}
			ix.add(own, spec.Devices)
		}
	}
	return ix, nil
}

func (ix *vendorIndex) add(own gpuvendor.OwnSpec, devs []cdispec.Device) {
	for _, d := range devs {
		if d.Name == "all" {
			continue
		}
		ix.byUUID[own.Kind()+" "+d.Name] = d.Name
		nodes := make([]string, len(d.ContainerEdits.DeviceNodes))
		for i, n := range d.ContainerEdits.DeviceNodes {
			nodes[i] = n.Path
		}
		if k, ok := own.Key(nodes); ok {
			ix.byKey[own.Kind()+" "+k] = d.Name
		}
	}
}

// lookup returns the vendor spec's device ID for a claim device, or "".
// UUID-named devices win; index-named ones (the nvidia-ctk default) are
// matched by the device nodes they carry.
func (ix *vendorIndex) lookup(d ClaimDevice) string {
	if ix == nil {
		return ""
	}
	v, ok := vendors.For(d.GPU.Vendor)
	if !ok || v.OwnSpec() == nil {
		return ""
	}
	own := v.OwnSpec()
	if name, ok := ix.byUUID[own.Kind()+" "+d.UUID()]; ok {
		return own.Kind() + "=" + name
	}
	k, ok := own.DeviceKey(&d.GPU, d.Partition)
	if !ok {
		return ""
	}
	if name, ok := ix.byKey[own.Kind()+" "+k]; ok {
		return own.Kind() + "=" + name
	}
	return ""
}
