//go:build cgo && linux

package nvml

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// nvlinkView is what one GPU's links reach, in MB/s (linkspeed.go).
type nvlinkView struct {
	switchMBps int64
	switches   map[string]bool // remote NVSwitch identities (switchKey)
	peers      map[int]int64   // peer GPU index -> MB/s over direct links
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
		if node.GPUs[i].Health.Lost {
			continue // nothing it says is current; it reaches nobody now
		}
		views[i] = b.nvlinks(h, &node.GPUs[i], byBus)
	}
	out := switchLinks(views)
	for i, v := range views {
		for j, bw := range v.peers {
			if j <= i {
				continue
			}
			// Each side counts the same links; take the larger in case
			// one side could not read some of them.
			out = append(out, inventory.Link{Kind: inventory.LinkNVLink, A: i, B: j, BandwidthGBps: gbps(max(bw, views[j].peers[i]))})
		}
		for j, bw := range v.peers {
			if j < i && views[j].peers[i] == 0 {
				// Seen only from this side.
				out = append(out, inventory.Link{Kind: inventory.LinkNVLink, A: j, B: i, BandwidthGBps: gbps(bw)})
			}
		}
	}
	sortLinks(out)
	return out
}

// switchLinks puts GPUs that share any switch on one plane (union-find)
// and gives each GPU with switch links one link to its plane.
func switchLinks(views []nvlinkView) []inventory.Link {
	plane := make([]int, len(views))
	for i := range plane {
		plane[i] = i
	}
	find := func(i int) int {
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
		out = append(out, inventory.Link{Kind: inventory.LinkNVSwitch, A: i, Switch: names[root], BandwidthGBps: gbps(v.switchMBps)})
	}
	return out
}

// nvlinks reads one GPU's links: which are up, their speeds (one field
// value call for all of them), and what each reaches.
func (b *Backend) nvlinks(h nvml.Device, g *inventory.GPU, byBus map[string]int) nvlinkView {
	v := nvlinkView{switches: map[string]bool{}, peers: map[int]int64{}}
	self := byBus[g.PCIBusID]
	up := b.upLinks(h, g)
	speeds := b.linkSpeeds(h, g, up)
	for _, link := range up {
		end, ok := b.linkEnd(h, g, link, byBus)
		if !ok {
			continue
		}
		mbps, ok := speeds[link]
		if !ok {
			mbps = b.nominalMBps(h, g, link)
		}
		switch {
		case end.toSwitch != "":
			v.switches[end.toSwitch] = true
			v.switchMBps += mbps
		case end.peer != self:
			v.peers[end.peer] += mbps
		}
	}
	return v
}

// upLinks are the GPU's enabled links. Query failures other than "no such
// link" stop the scan for this GPU and are logged; the GPU keeps what was
// read.
func (b *Backend) upLinks(h nvml.Device, g *inventory.GPU) []int {
	var up []int
	for link := 0; link < nvml.NVLINK_MAX_LINKS; link++ {
		state, ret := h.GetNvLinkState(link)
		if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue // no NVLink at all, or beyond this GPU's link count
		}
		if err := check(fmt.Sprintf("nvmlDeviceGetNvLinkState(%d)", link), ret); err != nil {
			b.logger.Error(err, "NVLink scan stopped", "uuid", g.UUID)
			return up
		}
		if state == nvml.FEATURE_ENABLED {
			up = append(up, link)
		}
	}
	return up
}

// linkEnd is what one link reaches: a switch (toSwitch, its identity) or
// the GPU of index peer.
type linkEnd struct {
	toSwitch string
	peer     int
}

// linkEnd asks what is at the other end of a link before anything else:
// on NVSwitch systems the remote's PCI info may be the placeholder
// FFFFFFFF:FF:FF.0 (every switch link of a GB200/GB300 tray reports it),
// which names no device, and a switch link needs no bus ID to be counted.
// A link to a GPU needs the remote bus ID to find the peer. Drivers
// without the type call (NOT_SUPPORTED, FUNCTION_NOT_FOUND, or any other
// failure of it) fall back to the bus ID: a remote that is not one of our GPUs is taken for a switch
// (POWER9 NPUs are the exception, and those systems report the type).
func (b *Backend) linkEnd(h nvml.Device, g *inventory.GPU, link int, byBus map[string]int) (linkEnd, bool) {
	typ, ret := h.GetNvLinkRemoteDeviceType(link)
	typeErr := check(fmt.Sprintf("nvmlDeviceGetNvLinkRemoteDeviceType(%d)", link), ret)
	known := typeErr == nil && typ != nvml.NVLINK_DEVICE_TYPE_UNKNOWN
	if typeErr != nil && !notSupported(typeErr) {
		b.logger.V(2).Info("NVLink remote type unreadable; judged by its bus ID", "uuid", g.UUID, "err", typeErr)
	}
	switch {
	case known && typ == nvml.NVLINK_DEVICE_TYPE_SWITCH:
		return linkEnd{toSwitch: b.switchKey(h, g, link)}, true
	case known && typ != nvml.NVLINK_DEVICE_TYPE_GPU:
		return linkEnd{}, false // IBM NPU: a CPU link, not a GPU fabric
	}
	remote, err := remoteBusID(h, link)
	if err != nil {
		b.logger.Error(err, "NVLink link skipped", "uuid", g.UUID, "link", link)
		return linkEnd{}, false
	}
	peer, isGPU := byBus[remote]
	switch {
	case isGPU:
		return linkEnd{peer: peer}, true
	case known: // a GPU we do not publish (excluded or lost)
		return linkEnd{}, false
	}
	return linkEnd{toSwitch: remote}, true
}

// switchKey names the switch a link reaches, for grouping GPUs into
// planes: its bus ID where NVML gives a real one; otherwise (the
// placeholder, or no answer) the node's one switch fabric, split by the
// GPU's fabric domain where it has one. NVSwitch systems connect every GPU
// of a node to every switch (DGX A100: 6 NVSwitches, DGX H100: 4 NVSwitch
// chips, a GB200 tray: all 18 switch chips of its rack), so GPUs whose
// switches cannot be told apart are still on one plane.
func (b *Backend) switchKey(h nvml.Device, g *inventory.GPU, link int) string {
	if remote, err := remoteBusID(h, link); err == nil {
		return remote
	}
	return "nvswitch-fabric:" + g.FabricDomain
}

// remoteBusID is the normalised bus ID of a link's remote end; the
// placeholder FFFFFFFF:FF:FF.0 is an error (it names no device).
func remoteBusID(h nvml.Device, link int) (string, error) {
	pci, ret := h.GetNvLinkRemotePciInfo(link)
	if err := check(fmt.Sprintf("nvmlDeviceGetNvLinkRemotePciInfo(%d)", link), ret); err != nil {
		return "", err
	}
	raw := cString(pci.BusId[:])
	if isPlaceholderBusID(raw) {
		return "", fmt.Errorf("nvmlDeviceGetNvLinkRemotePciInfo(%d): placeholder bus ID %q", link, raw)
	}
	return normalizeBusID(raw)
}
