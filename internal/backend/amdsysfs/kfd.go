package amdsysfs

import (
	"fmt"
	"path"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// topologyDir is the KFD topology below the sysfs root.
const topologyDir = "sys/class/kfd/kfd/topology"

// KFD numbers this backend depends on, from the Linux kernel:
// drivers/gpu/drm/amd/amdkfd/kfd_crat.h (CRAT_IOLINK_TYPE_*) and
// kfd_topology.h (HSA_MEM_HEAP_TYPE_*).
const (
	ioLinkTypePCIe = 2  // CRAT_IOLINK_TYPE_PCIEXPRESS
	ioLinkTypeXGMI = 11 // CRAT_IOLINK_TYPE_XGMI

	heapFBPublic  = 1 // HSA_MEM_HEAP_TYPE_FB_PUBLIC: VRAM the host can map
	heapFBPrivate = 2 // HSA_MEM_HEAP_TYPE_FB_PRIVATE: VRAM beyond the BAR
)

// kfdNode is one KFD topology node as read from sysfs.
type kfdNode struct {
	ID    int
	GPUID uint64
	Name  string
	Props Properties
	// MemBanks and Links are nil when unreadable; problems lists why, so a
	// GPU can be published with what was read and the reason logged.
	MemBanks []Properties
	Links    []Properties // io_links then p2p_links
	Problems []string
}

// isGPU reports whether the node is a GPU: KFD gives CPU nodes gpu_id 0
// and simd_count 0.
func (n *kfdNode) isGPU() bool {
	simd, _ := n.Props.Get("simd_count")
	return n.GPUID != 0 && simd != 0
}

// nodeError is why a KFD node is left out: its error names the node, and
// reason is how the agent counts it (inventory.Unpublished).
type nodeError struct {
	node   int
	reason inventory.UnpublishedReason
	err    error
}

func (e *nodeError) Error() string { return e.err.Error() }
func (e *nodeError) Unwrap() error { return e.err }

// readTopology reads generation_id and every node. A node whose gpu_id or
// properties cannot be read is returned in bad (a *nodeError) with the
// reason; it cannot be identified, so it is never published.
func readTopology(r fsRoot) (gen string, nodes []*kfdNode, bad []error, err error) {
	gen, err = r.readString(path.Join(topologyDir, "generation_id"))
	if err != nil {
		return "", nil, nil, err
	}
	ids, err := r.numberedDirs(path.Join(topologyDir, "nodes"))
	if err != nil {
		return "", nil, nil, err
	}
	for _, id := range ids {
		n, err := readNode(r, id)
		if err != nil {
			bad = append(bad, &nodeError{node: id, reason: inventory.UnpublishedUnreadable, err: err})
			continue
		}
		nodes = append(nodes, n)
	}
	return gen, nodes, bad, nil
}

func readNode(r fsRoot, id int) (*kfdNode, error) {
	dir := path.Join(topologyDir, "nodes", fmt.Sprint(id))
	n := &kfdNode{ID: id}
	gpuID, err := r.readInt(path.Join(dir, "gpu_id"))
	if err != nil {
		return nil, fmt.Errorf("KFD node %d: %w", id, err)
	}
	if gpuID < 0 {
		return nil, fmt.Errorf("KFD node %d: negative gpu_id %d", id, gpuID)
	}
	n.GPUID = uint64(gpuID)
	if n.Props, err = r.readProperties(path.Join(dir, "properties")); err != nil {
		return nil, fmt.Errorf("KFD node %d: %w", id, err)
	}
	// The name is informational ("ip discovery" on IP-discovery GPUs).
	n.Name, _ = r.readString(path.Join(dir, "name"))
	if simd, _ := n.Props.Get("simd_count"); n.GPUID != 0 && simd == 0 {
		// A gpu_id says GPU; no compute units says the properties are
		// empty or cut short. Left out, but said, never silently.
		return nil, fmt.Errorf("KFD node %d: gpu_id %d but its properties give no simd_count (empty or truncated file)", id, n.GPUID)
	}
	if !n.isGPU() {
		return n, nil
	}
	n.MemBanks = readList(r, path.Join(dir, "mem_banks"), n)
	// p2p_links arrived with Linux 6.x KFD; older kernels list every link
	// under io_links, so its absence is no problem.
	n.Links = readList(r, path.Join(dir, "io_links"), n)
	if r.exists(path.Join(dir, "p2p_links")) {
		n.Links = append(n.Links, readList(r, path.Join(dir, "p2p_links"), n)...)
	}
	return n, nil
}

// readList reads dir/N/properties for every N, noting problems on n.
func readList(r fsRoot, dir string, n *kfdNode) []Properties {
	if !r.exists(dir) {
		n.Problems = append(n.Problems, fmt.Sprintf("%s is missing", r.path(dir)))
		return nil
	}
	ids, err := r.numberedDirs(dir)
	if err != nil {
		n.Problems = append(n.Problems, err.Error())
		return nil
	}
	var out []Properties
	for _, i := range ids {
		p, err := r.readProperties(path.Join(dir, fmt.Sprint(i), "properties"))
		if err != nil {
			n.Problems = append(n.Problems, err.Error())
			continue
		}
		out = append(out, p)
	}
	return out
}

// vramBytes sums the node's VRAM banks. ok=false when there are none.
// A sum below minVRAM is returned as is: facts judges it.
func (n *kfdNode) vramBytes() (int64, bool) {
	var sum uint64
	found := false
	for _, b := range n.MemBanks {
		if t, _ := b.Get("heap_type"); t == heapFBPublic || t == heapFBPrivate {
			s, _ := b.Get("size_in_bytes")
			sum += s
			found = true
		}
	}
	if sum > 1<<62 {
		return 0, false
	}
	return int64(sum), found
}
