package topocmd

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tessera-gpu/tessera/internal/gpuvendor/vendors"
	"github.com/tessera-gpu/tessera/internal/inspect"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// Link kinds between two GPUs, named as nvidia-smi topo -m names them.
const (
	LinkSelf    = "X"
	LinkSYS     = "SYS"  // different NUMA nodes
	LinkNODE    = "NODE" // same NUMA node, different PCIe root (host bridge)
	LinkPHB     = "PHB"  // same PCIe root
	LinkXGMI    = "XGMI" // AMD Infinity Fabric, same island
	LinkNV      = "NV"   // NVLink/NVSwitch, bandwidth unpublished
	LinkUnknown = "?"    // not enough attributes to tell
)

// NVLinkGBps is the unidirectional bandwidth of one NVLink where the GPU's
// architecture says nothing better (generations 3 and 4: 25 GB/s per
// direction). NV<n> is the published island bandwidth
// (fabricBandwidthGBps, unidirectional per GPU) divided by the per-link
// bandwidth of the GPU's generation (gpuvendor's Collective.LinkGBps),
// rounded: H100 SXM 450 -> NV18, A100 SXM or an A100 PCIe bridge pair
// 300 -> NV12, a GB200 900 -> NV18 (NVLink 5, 50 GB/s a link), as
// nvidia-smi prints for those machines.
const NVLinkGBps = 25

// GPU is what the matrix needs of one whole GPU.
type GPU struct {
	Device        string `json:"device"`
	Fabric        string `json:"fabric,omitempty"`
	Island        string `json:"island,omitempty"`
	BandwidthGBps int64  `json:"bandwidthGBps,omitempty"`
	PCIeRoot      string `json:"pcieRoot,omitempty"`
	NUMANode      *int64 `json:"numaNode,omitempty"`
	// LinkGBps is one NVLink's bandwidth of this GPU's generation; 0:
	// NVLinkGBps.
	LinkGBps int64 `json:"-"`
}

// Link classifies the path between a and b from their published attributes:
// X for the same device; a shared NVLink/NVSwitch island NV<n> (see
// NVLinkGBps); a shared xGMI island XGMI; otherwise by PCIe: the same PCIe
// root PHB, different roots on one NUMA node NODE, different NUMA nodes SYS.
// PCIe switches below a root are not published, so PIX and PXB (paths
// through switches only) are never returned: two GPUs behind one switch
// show as PHB. Without the attributes to decide, "?".
func Link(a, b GPU) string {
	if a.Device == b.Device {
		return LinkSelf
	}
	if a.Island != "" && a.Island == b.Island && a.Fabric == b.Fabric {
		switch a.Fabric {
		case "nvswitch", "nvlink":
			bw := min(a.BandwidthGBps, b.BandwidthGBps)
			per := max(a.LinkGBps, b.LinkGBps)
			if per <= 0 {
				per = NVLinkGBps
			}
			if n := int64(math.Round(float64(bw) / float64(per))); n > 0 {
				return fmt.Sprintf("NV%d", n)
			}
			return LinkNV
		case "xgmi":
			return LinkXGMI
		}
	}
	if a.PCIeRoot != "" && a.PCIeRoot == b.PCIeRoot {
		return LinkPHB
	}
	if a.NUMANode != nil && b.NUMANode != nil {
		if *a.NUMANode != *b.NUMANode {
			return LinkSYS
		}
		if a.PCIeRoot != "" && b.PCIeRoot != "" {
			return LinkNODE
		}
	}
	return LinkUnknown
}

// Topology is the GPU-to-GPU matrix of one node.
type Topology struct {
	Node string `json:"node"`
	GPUs []GPU  `json:"gpus"`
	// Links[i][j] is Link(GPUs[i], GPUs[j]).
	Links   [][]string `json:"links"`
	Islands []Island   `json:"islands"`
	// PartitionedOnly are GPUs published only as partitions (MIG mode):
	// no whole-GPU device, so not in the matrix.
	PartitionedOnly []string `json:"partitionedOnly,omitempty"`
}

// Island is a fabric island: the GPUs a fabric joins.
type Island struct {
	ID            string `json:"id"`
	Fabric        string `json:"fabric"`
	BandwidthGBps int64  `json:"bandwidthGBps,omitempty"`
	// Domain is the multi-node NVLink domain its GPUs are part of, where
	// they publish one (fabricDomain): islands of several nodes with the
	// same domain reach each other over NVLink.
	Domain  string   `json:"domain,omitempty"`
	Devices []string `json:"devices"`
}

// Build builds node's matrix from its whole-GPU devices (type gpu):
// on a dynamic node the placements are left out.
func Build(s *inspect.Snapshot, node string) (*Topology, error) {
	var nd *inspect.NodeDevices
	var nodes []string
	for _, n := range inspect.NodesOf(s) {
		nodes = append(nodes, n.Name)
		if n.Name == node {
			nd = n
		}
	}
	if nd == nil {
		return nil, fmt.Errorf("no ResourceSlices of driver %s for node %s in %s (nodes: %s)", names.DriverName, node, s.Source, strings.Join(nodes, ", "))
	}
	t := &Topology{Node: node, GPUs: []GPU{}, Islands: []Island{}}
	islands := map[string]*Island{}
	for _, g := range nd.GPUGroups() {
		if g.Whole == nil {
			t.PartitionedOnly = append(t.PartitionedOnly, g.Name)
			continue
		}
		w := g.Whole
		tg := GPU{
			Device:   w.Name,
			Fabric:   inspect.AttrString(w, publish.AttrFabric),
			Island:   inspect.AttrString(w, publish.AttrFabricIsland),
			PCIeRoot: inspect.AttrString(w, inspect.AttrPCIeRoot),
		}
		tg.BandwidthGBps, _ = inspect.AttrInt(w, publish.AttrFabricBandwidth)
		tg.LinkGBps = linkGBps(inspect.AttrString(w, publish.AttrVendor), inspect.AttrString(w, publish.AttrArchitecture))
		if v, ok := inspect.AttrInt(w, inspect.AttrNUMANode); ok {
			tg.NUMANode = &v
		}
		t.GPUs = append(t.GPUs, tg)
		if tg.Island == "" {
			continue
		}
		is := islands[tg.Island]
		if is == nil {
			is = &Island{ID: tg.Island, Fabric: tg.Fabric, BandwidthGBps: tg.BandwidthGBps, Domain: inspect.AttrString(w, publish.AttrFabricDomain)}
			islands[tg.Island] = is
		}
		is.Devices = append(is.Devices, tg.Device)
	}
	if len(t.GPUs) == 0 {
		return nil, fmt.Errorf("node %s publishes no whole GPUs (type %s)", node, publish.TypeGPU)
	}
	for _, a := range t.GPUs {
		row := make([]string, len(t.GPUs))
		for j, b := range t.GPUs {
			row[j] = Link(a, b)
		}
		t.Links = append(t.Links, row)
	}
	for _, is := range islands {
		t.Islands = append(t.Islands, *is)
	}
	slices.SortFunc(t.Islands, func(a, b Island) int {
		return inspect.CompareDeviceNames(a.Devices[0], b.Devices[0])
	})
	return t, nil
}

// linkGBps is one direct link's bandwidth for a GPU of vendor and
// architecture, as its collective library counts links; 0 when unknown.
func linkGBps(vendor, arch string) int64 {
	v, ok := vendors.For(inventory.Vendor(vendor))
	if !ok || v.Collective() == nil {
		return 0
	}
	return v.Collective().LinkGBps(&inventory.GPU{Architecture: arch})
}
