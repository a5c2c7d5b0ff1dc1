package cdi

import (
	"fmt"
	"regexp"
	"strconv"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/tessera-gpu/tessera/internal/gpuvendor/nvidia"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// NVIDIAVendorKind is the kind of the node-wide spec nvidia-ctk generates
// (`nvidia-ctk cdi generate`, usually /etc/cdi or /var/run/cdi/nvidia.yaml).
// Its devices carry what the per-claim spec does not: the driver's user-space
// libraries, firmware and hooks.
const NVIDIAVendorKind = "nvidia.com/gpu"

var gpuNode = regexp.MustCompile(`^/dev/nvidia([0-9]+)$`)
var capNode = regexp.MustCompile(`^/dev/nvidia-caps/nvidia-cap([0-9]+)$`)

// vendorIndex maps the node's NVIDIA GPUs and MIG instances to the device
// names of the vendor spec, loaded fresh for each claim (a driver upgrade
// regenerates the spec).
type vendorIndex struct {
	byUUID  map[string]string // device name is a GPU or MIG UUID
	byMinor map[int]string    // whole-GPU device with exactly one GPU node
	byCaps  map[[2]int]string // MIG device by its GI and CI access minors
}

func loadVendorIndex(dirs []string) (*vendorIndex, error) {
	if len(dirs) == 0 {
		return nil, nil
	}
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(dirs...), cdiapi.WithAutoRefresh(false))
	if err != nil {
		return nil, fmt.Errorf("read vendor CDI specs in %v: %w", dirs, err)
	}
	ix := &vendorIndex{byUUID: map[string]string{}, byMinor: map[int]string{}, byCaps: map[[2]int]string{}}
	for _, spec := range cache.GetVendorSpecs("nvidia.com") {
		if spec.GetClass() != "gpu" {
			continue
		}
		for _, d := range spec.Devices {
			if d.Name == "all" {
				continue
			}
			ix.byUUID[d.Name] = d.Name
			var gpus, caps []int
			for _, n := range d.ContainerEdits.DeviceNodes {
				if m := gpuNode.FindStringSubmatch(n.Path); m != nil {
					v, _ := strconv.Atoi(m[1])
					gpus = append(gpus, v)
				}
				if m := capNode.FindStringSubmatch(n.Path); m != nil {
					v, _ := strconv.Atoi(m[1])
					caps = append(caps, v)
				}
			}
			switch {
			case len(gpus) == 1 && len(caps) == 0:
				ix.byMinor[gpus[0]] = d.Name
			case len(gpus) == 1 && len(caps) == 2:
				ix.byCaps[[2]int{caps[0], caps[1]}] = d.Name
			}
		}
	}
	return ix, nil
}

// lookup returns the vendor device ID for an NVIDIA claim device, or "".
// UUID-named devices win; index-named ones (the nvidia-ctk default) are
// matched by the device nodes they carry.
func (ix *vendorIndex) lookup(d ClaimDevice) string {
	if ix == nil || d.GPU.Vendor != inventory.VendorNVIDIA {
		return ""
	}
	uuid := d.GPU.UUID
	if d.Partition != nil {
		uuid = d.Partition.UUID
	}
	if name, ok := ix.byUUID[uuid]; ok {
		return NVIDIAVendorKind + "=" + name
	}
	if d.Partition == nil {
		if name, ok := ix.byMinor[d.GPU.Minor]; ok {
			return NVIDIAVendorKind + "=" + name
		}
		return ""
	}
	gi, ci, err := nvidia.MIGCapMinors(d.GPU.Minor, d.Partition.GPUInstanceID, d.Partition.ComputeInstanceID)
	if err != nil {
		return ""
	}
	if name, ok := ix.byCaps[[2]int{gi, ci}]; ok {
		return NVIDIAVendorKind + "=" + name
	}
	return ""
}
