//go:build cgo && linux

package nvml

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// perLinkGBps is one NVLink's unidirectional bandwidth in GB/s by NVML's
// nvmlNvlinkVersion_t value, from NVIDIA's per-GPU totals:
//
//	1 (1.0, P100)  20: 4 links, 160 GB/s bidirectional (P100 whitepaper)
//	2 (2.0, V100)  25: 6 links, 300 GB/s (V100 whitepaper)
//	3 (2.2)        25: NVLink 2 signalling (Turing/Volta-class parts)
//	4 (3.0, A100)  25: 12 links, 600 GB/s (A100 whitepaper)
//	5 (3.1, GA10x) 14: x4 bridge links, 112.5 GB/s over 4 links (RTX A6000 datasheet)
//	6 (4.0, H100)  25: 18 links, 900 GB/s (H100 datasheet; the sim's 450 GB/s one way)
//	7 (5.0, B200)  50: 18 links, 1.8 TB/s (Blackwell datasheet)
//
// Versions not listed give 0 and a log line rather than a guess.
var perLinkGBps = map[uint32]int64{1: 20, 2: 25, 3: 25, 4: 25, 5: 14, 6: 25, 7: 50}

// linkGBps returns a link's bandwidth. Drivers before the version enum
// returned the NVLink major version (Blackwell: 5), which the enum reads as
// 3.1; a Blackwell GPU only has NVLink 5, so its architecture settles it.
func linkGBps(version uint32, arch string) int64 {
	if arch == "blackwell" {
		return 50
	}
	return perLinkGBps[version]
}

// nvlinkView is what one GPU's links reach.
type nvlinkView struct {
	switchGBps int64
	switches   map[string]bool // remote NVSwitch PCI bus IDs
	peers      map[int]int64   // peer GPU index -> bandwidth over direct links
}

// links builds the node's link graph from every GPU's per-link state:
// links to an NVSwitch put the GPU on that switch's plane (GPUs sharing a
// switch form one plane); links to another GPU are direct NVLink edges. A
// GPU whose NVLink queries are NOT_SUPPORTED has no NVLink: PCIe only.
func (b *Backend) links(node *inventory.Node, handles []nvml.Device) []inventory.Link {
	byBus := map[string]int{}
	for i, g := range node.GPUs {
		byBus[g.PCIBusID] = i
	}
	views := make([]nvlinkView, len(node.GPUs))
	for i, h := range handles {
		views[i] = b.nvlinks(h, &node.GPUs[i], byBus)
	}

	// Planes: union GPUs that share any switch.
	plane := make([]int, len(views))
	for i := range plane {
		plane[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		for plane[i] != i {
			i = plane[i]
		}
		return i
	}
	owner := map[string]int{}
	for i, v := range views {
		for sw := range v.switches {
			if j, ok := owner[sw]; ok {
				plane[find(i)] = find(j)
			} else {
				owner[sw] = i
			}
		}
	}
	names := map[int]string{}
	var out []inventory.Link
	for i, v := range views {
		if len(v.switches) == 0 {
			continue
		}
		root := find(i)
		if _, ok := names[root]; !ok {
			names[root] = fmt.Sprintf("nvswitch%d", len(names))
		}
		out = append(out, inventory.Link{Kind: inventory.LinkNVSwitch, A: i, Switch: names[root], BandwidthGBps: v.switchGBps})
	}
	for i, v := range views {
		for j, bw := range v.peers {
			if j <= i {
				continue
			}
			// Each side counts the same links; take the larger in case
			// one side could not read some of them.
			out = append(out, inventory.Link{Kind: inventory.LinkNVLink, A: i, B: j, BandwidthGBps: max(bw, views[j].peers[i])})
		}
		for j, bw := range v.peers {
			if j < i && views[j].peers[i] == 0 {
				// Seen only from this side.
				out = append(out, inventory.Link{Kind: inventory.LinkNVLink, A: j, B: i, BandwidthGBps: bw})
			}
		}
	}
	sortLinks(out)
	return out
}

// nvlinks reads one GPU's links. Query failures other than "no such link"
// stop the scan for this GPU and are logged; the GPU keeps what was read.
func (b *Backend) nvlinks(h nvml.Device, g *inventory.GPU, byBus map[string]int) nvlinkView {
	v := nvlinkView{switches: map[string]bool{}, peers: map[int]int64{}}
	self := byBus[g.PCIBusID]
	for link := 0; link < nvml.NVLINK_MAX_LINKS; link++ {
		state, ret := h.GetNvLinkState(link)
		if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue // no NVLink at all, or beyond this GPU's link count
		}
		if err := check(fmt.Sprintf("nvmlDeviceGetNvLinkState(%d)", link), ret); err != nil {
			b.logger.Error(err, "NVLink scan stopped", "uuid", g.UUID)
			return v
		}
		if state != nvml.FEATURE_ENABLED {
			continue
		}
		version, ret := h.GetNvLinkVersion(link)
		if err := check(fmt.Sprintf("nvmlDeviceGetNvLinkVersion(%d)", link), ret); err != nil {
			b.logger.Error(err, "NVLink link skipped", "uuid", g.UUID)
			continue
		}
		bw := linkGBps(version, g.Architecture)
		if bw == 0 {
			b.logger.Info("unknown NVLink version; link counted without bandwidth", "uuid", g.UUID, "link", link, "version", version)
		}
		pci, ret := h.GetNvLinkRemotePciInfo(link)
		if err := check(fmt.Sprintf("nvmlDeviceGetNvLinkRemotePciInfo(%d)", link), ret); err != nil {
			b.logger.Error(err, "NVLink link skipped", "uuid", g.UUID)
			continue
		}
		remote, err := normalizeBusID(cString(pci.BusId[:]))
		if err != nil {
			b.logger.Error(err, "NVLink link skipped", "uuid", g.UUID, "link", link)
			continue
		}
		peer, isGPU := byBus[remote]
		// The remote's type, where the driver reports it, decides; older
		// drivers lack the call, and then a remote that is not one of our
		// GPUs is taken for a switch (POWER9 NPUs are the exception, and
		// those systems report the type).
		switch typ, ret := h.GetNvLinkRemoteDeviceType(link); {
		case ret == nvml.SUCCESS && typ == nvml.NVLINK_DEVICE_TYPE_SWITCH:
			isGPU = false
		case ret == nvml.SUCCESS && typ == nvml.NVLINK_DEVICE_TYPE_GPU:
			if !isGPU {
				continue // a GPU we do not publish (excluded or lost)
			}
		case ret == nvml.SUCCESS && typ != nvml.NVLINK_DEVICE_TYPE_UNKNOWN:
			continue // IBM NPU: a CPU link, not a GPU fabric
		}
		if isGPU {
			if peer != self {
				v.peers[peer] += bw
			}
			continue
		}
		v.switches[remote] = true
		v.switchGBps += bw
	}
	return v
}
