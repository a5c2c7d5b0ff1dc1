package alloctest

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/deviceattribute"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/pci"
)

// NVIDIADriverName is the NVIDIA DRA driver's name.
const NVIDIADriverName = "gpu.nvidia.com"

// NVIDIA's GPU instance profile IDs (nvml.h GPU_INSTANCE_PROFILE_*), which
// its device names carry.
var nvidiaProfileIDs = map[string]int{
	"1g.10gb": 19, "1g.10gb+me": 20, "1g.20gb": 15, "2g.20gb": 14, "3g.40gb": 9, "4g.40gb": 5, "7g.80gb": 0,
	"1g.18gb": 19, "1g.18gb+me": 20, "1g.35gb": 15, "2g.35gb": 14, "3g.71gb": 9, "4g.71gb": 5, "7g.141gb": 0,
	"1g.5gb": 19, "1g.5gb+me": 20, "2g.10gb": 14, "3g.20gb": 9, "4g.20gb": 5, "7g.40gb": 0,
}

// NVIDIALayout is what the NVIDIA DRA driver (NVIDIA/k8s-dra-driver-gpu,
// cmd/gpu-kubelet-plugin, DynamicMIG feature, Kubernetes 1.35+ split
// slices; read at commit 22407113, May 2026) publishes for the same
// hardware: the reference the dynamic layout's scheduling cost is measured
// against (BenchmarkFleet). Its rules, reproduced here from inventory:
//
//   - one slice holding every GPU's counter set first, then one slice per
//     GPU (in PCI bus order) with the GPU and all its MIG placements, the
//     devices sorted by name ("gpu-0", "gpu-0-mig-1g10gb-19-0", ...);
//   - a GPU carries type, uuid, productName, brand, architecture,
//     cudaComputeCapability, driverVersion, cudaDriverVersion, pciBusID and
//     pcieRoot; a placement the same less uuid, plus parentUUID and profile;
//   - every device has seven capacities (multiprocessors, copyEngines,
//     decoders, encoders, jpegEngines, ofaEngines, memory; a GPU the maximum
//     over its profiles), and consumes each as a counter plus one counter
//     per memory slice it covers (a GPU: all of them).
//
// Every GPU must be MIG capable.
func NVIDIALayout(node string, n *inventory.Node) ([]*resourceapi.ResourceSlice, error) {
	gpus := slices.Clone(n.GPUs)
	var sortErr error
	slices.SortFunc(gpus, func(a, b inventory.GPU) int {
		x, err1 := pci.ParseBusID(a.PCIBusID)
		y, err2 := pci.ParseBusID(b.PCIBusID)
		if err1 != nil || err2 != nil {
			sortErr = fmt.Errorf("bus IDs %q, %q: %v %v", a.PCIBusID, b.PCIBusID, err1, err2)
			return 0
		}
		if x.Less(y) {
			return -1
		}
		if y.Less(x) {
			return 1
		}
		return 0
	})
	if sortErr != nil {
		return nil, sortErr
	}
	counters := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{}}
	out := []*resourceapi.ResourceSlice{counters}
	for minor, g := range gpus {
		pt := g.Partitioning
		if pt == nil || pt.Kind != inventory.PartitionMIG {
			return nil, fmt.Errorf("GPU %s: not MIG capable", g.UUID)
		}
		name := fmt.Sprintf("gpu-%d", minor)
		set := name + "-counter-set"
		maxCaps := map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{}
		var devs []resourceapi.Device
		for _, pr := range pt.Profiles {
			caps := nvidiaCapacities(&pr)
			for k, v := range caps {
				if cur, ok := maxCaps[k]; !ok || cur.Value.Cmp(v.Value) < 0 {
					maxCaps[k] = v
				}
			}
			id, ok := nvidiaProfileIDs[pr.Name]
			if !ok {
				return nil, fmt.Errorf("GPU %s: no NVML profile ID known for %s", g.UUID, pr.Name)
			}
			for _, pl := range pr.Placements {
				a := nvidiaAttributes(&g, "mig")
				a["parentUUID"] = str(g.UUID)
				a["profile"] = str(pr.Name)
				devs = append(devs, resourceapi.Device{
					Name:       fmt.Sprintf("%s-mig-%s-%d-%d", name, rfc1123(strings.ReplaceAll(pr.Name, ".", "")), id, pl.Start),
					Attributes: a,
					Capacity:   caps,
					ConsumesCounters: []resourceapi.DeviceCounterConsumption{{
						CounterSet: set, Counters: nvidiaCounters(caps, pl.Start, pl.Size),
					}},
				})
			}
		}
		whole := nvidiaAttributes(&g, "gpu")
		whole["uuid"] = str(g.UUID)
		all := nvidiaCounters(maxCaps, 0, pt.MemorySlices)
		devs = append(devs, resourceapi.Device{
			Name: name, Attributes: whole, Capacity: maxCaps,
			ConsumesCounters: []resourceapi.DeviceCounterConsumption{{CounterSet: set, Counters: all}},
		})
		slices.SortFunc(devs, func(a, b resourceapi.Device) int { return strings.Compare(a.Name, b.Name) })
		counters.Spec.SharedCounters = append(counters.Spec.SharedCounters, resourceapi.CounterSet{Name: set, Counters: maps.Clone(all)})
		out = append(out, &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Devices: devs}})
	}
	for i, s := range out {
		nodeName := node
		// The kubelet plugin helper's naming: an index first, so the
		// allocator (which sorts a pool's slices by name) sees them in order.
		s.ObjectMeta = metav1.ObjectMeta{GenerateName: fmt.Sprintf("%05x-%s-%s-", i, NVIDIADriverName, node)}
		s.Spec.Driver = NVIDIADriverName
		s.Spec.NodeName = &nodeName
		s.Spec.Pool = resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: int64(len(out))}
	}
	return out, nil
}

func nvidiaAttributes(g *inventory.GPU, typ string) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	a := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"type":                  str(typ),
		"productName":           str(g.ProductName),
		"brand":                 str("Nvidia"),
		"architecture":          str(strings.ToUpper(g.Architecture[:1]) + g.Architecture[1:]),
		"cudaComputeCapability": version(g.ComputeCapability),
		"driverVersion":         version(g.DriverVersion),
		"cudaDriverVersion":     version("13.0.0"),
	}
	a[deviceattribute.StandardDeviceAttributePCIBusID] = str(g.PCIBusID)
	if g.PCIeRoot != "" {
		a[deviceattribute.StandardDeviceAttributePCIeRoot] = str(g.PCIeRoot)
	}
	return a
}

func nvidiaCapacities(pr *inventory.PartitionProfile) map[resourceapi.QualifiedName]resourceapi.DeviceCapacity {
	c := func(v int64) resourceapi.DeviceCapacity {
		return resourceapi.DeviceCapacity{Value: *resource.NewQuantity(v, resource.BinarySI)}
	}
	return map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
		"multiprocessors": c(pr.ComputeUnits),
		"copyEngines":     c(pr.Engines["copyEngines"]),
		"decoders":        c(pr.Engines["decoders"]),
		"encoders":        c(pr.Engines["encoders"]),
		"jpegEngines":     c(pr.Engines["jpegDecoders"]),
		"ofaEngines":      c(pr.Engines["ofa"]),
		"memory":          c(pr.MemoryBytes),
	}
}

// nvidiaCounters is a device's consumption: each capacity as a counter
// (camelCase to DNS label) and one counter per memory slice covered.
func nvidiaCounters(caps map[resourceapi.QualifiedName]resourceapi.DeviceCapacity, start, size int) map[string]resourceapi.Counter {
	out := map[string]resourceapi.Counter{}
	for name, c := range caps {
		out[camelToDNS(string(name))] = resourceapi.Counter{Value: c.Value}
	}
	for i := start; i < start+size; i++ {
		out[fmt.Sprintf("memory-slice-%d", i)] = resourceapi.Counter{Value: *resource.NewQuantity(1, resource.BinarySI)}
	}
	return out
}

var (
	notDNS   = regexp.MustCompile(`[^a-z0-9-.]`)
	camelHop = regexp.MustCompile(`([a-z0-9])([A-Z])`)
)

func rfc1123(s string) string {
	return strings.TrimSuffix(strings.Trim(notDNS.ReplaceAllString(strings.ToLower(s), "-"), "-"), ".")
}

func camelToDNS(s string) string { return rfc1123(camelHop.ReplaceAllString(s, "$1-$2")) }

func str(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }

func version(v string) resourceapi.DeviceAttribute {
	return resourceapi.DeviceAttribute{VersionValue: &v}
}

// NVIDIAClasses are the NVIDIA driver chart's DeviceClasses for whole GPUs
// and MIG devices.
func NVIDIAClasses() []*resourceapi.DeviceClass {
	class := func(name, typ string) *resourceapi.DeviceClass {
		return &resourceapi.DeviceClass{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
				Expression: fmt.Sprintf("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '%s'", typ),
			}}}},
		}
	}
	return []*resourceapi.DeviceClass{class("gpu.nvidia.com", "gpu"), class("mig.nvidia.com", "mig")}
}
