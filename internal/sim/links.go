package sim

import (
	"fmt"
	"math"
	"slices"

	"github.com/google/uuid"

	"github.com/tessera-gpu/tessera/internal/gpuvendor/nvidia"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// links turns the machine file's links into inventory links, reporting
// every bad entry with its path: NVSwitch planes, then NVLink pairs, xGMI
// meshes (one pair per two GPUs) and PCIe peer pairs.
func (b *builder) links() {
	if len(b.m.Node.GPUs) == 0 {
		return
	}
	l := &linker{b: b, pairs: map[edge]string{}}
	l.switchPlanes()
	for i, p := range b.f.Links.NVLink {
		l.pair(inventory.LinkNVLink, fmt.Sprintf("links.nvlink[%d]", i), p)
	}
	for i, m := range b.f.Links.XGMI {
		l.mesh(fmt.Sprintf("links.xgmi[%d]", i), m)
	}
	for i, p := range b.f.Links.PCIe {
		l.pair(inventory.LinkPCIe, fmt.Sprintf("links.pcie[%d]", i), p)
	}
}

// linker checks and adds one machine file's links.
type linker struct {
	b *builder
	// pairs: where each GPU pair of a kind was linked, so a second edge
	// between the same two GPUs is an error naming the first.
	pairs map[edge]string
}

// edge is a GPU pair of one link kind, lower index first.
type edge struct {
	kind   inventory.LinkKind
	lo, hi int
}

func (l *linker) gpus() int { return len(l.b.m.Node.GPUs) }

func (l *linker) inRange(path string, i int) bool {
	if n := l.gpus(); i < 0 || i >= n {
		l.b.errorf(path, "GPU %d does not exist (the machine has %d GPUs: 0-%d)", i, n, n-1)
		return false
	}
	return true
}

// vendorIs checks that GPU i is of vendor v, the only vendor kind joins.
func (l *linker) vendorIs(path string, i int, v inventory.Vendor, kind inventory.LinkKind) {
	if g := l.b.m.Node.GPUs[i]; g.Vendor != v {
		l.b.errorf(path, "GPU %d is a %s GPU; %s links join %s GPUs only", i, g.Vendor, kind, v)
	}
}

// set is the GPUs a plane or mesh lists (all when none), each once and in range.
func (l *linker) set(path string, gpus []int) []int {
	if len(gpus) == 0 {
		all := make([]int, l.gpus())
		for i := range all {
			all[i] = i
		}
		return all
	}
	out := []int{}
	for k, i := range gpus {
		p := fmt.Sprintf("%s.gpus[%d]", path, k)
		if slices.Contains(gpus[:k], i) {
			l.b.errorf(p, "GPU %d is listed twice", i)
		} else if l.inRange(p, i) {
			out = append(out, i)
		}
	}
	return out
}

func (l *linker) positive(path string, bw int64) {
	if bw <= 0 {
		l.b.errorf(path+".bandwidthGBps", "must be more than 0 (GB/s, unidirectional)")
	}
}

// switchPlanes adds one NVSwitch link per GPU of each plane.
func (l *linker) switchPlanes() {
	planes := map[string]int{}
	for i, sp := range l.b.f.Links.NVSwitch {
		path := fmt.Sprintf("links.nvswitch[%d]", i)
		if sp.Plane == "" {
			l.b.errorf(path+".plane", "is required (the switch plane's name)")
		} else if j, dup := planes[sp.Plane]; dup {
			l.b.errorf(path+".plane", "plane %q is already defined at links.nvswitch[%d]", sp.Plane, j)
		}
		planes[sp.Plane] = i
		l.positive(path, sp.BandwidthGBps)
		domain := l.fabricDomain(path+".fabric", sp.Fabric)
		for _, g := range l.set(path, sp.GPUs) {
			l.vendorIs(path, g, inventory.VendorNVIDIA, inventory.LinkNVSwitch)
			l.b.m.Node.Links = append(l.b.m.Node.Links, inventory.Link{Kind: inventory.LinkNVSwitch, A: g, Switch: sp.Plane, BandwidthGBps: sp.BandwidthGBps})
			l.b.m.Node.GPUs[g].FabricDomain = domain
		}
	}
}

// fabricDomain is a plane's multi-node NVLink domain as the nvml backend
// publishes it (gpuvendor/nvidia.FabricDomain); "" without one.
func (l *linker) fabricDomain(path string, f *fileFabric) string {
	if f == nil {
		return ""
	}
	if f.CliqueID == nil || *f.CliqueID < 0 || *f.CliqueID > math.MaxUint32 {
		l.b.errorf(path+".cliqueID", "is required, NVML's fabric clique ID (0 to 4294967295)")
		return ""
	}
	id, err := uuid.Parse(f.ClusterUUID)
	if err != nil {
		l.b.errorf(path+".clusterUUID", "%q is not a UUID: %v", f.ClusterUUID, err)
		return ""
	}
	d := nvidia.FabricDomain(id, uint32(*f.CliqueID))
	if d == "" {
		l.b.errorf(path+".clusterUUID", "is all zeros: NVML reports that on single-node NVLink systems, which have no fabric domain (leave fabric out)")
	}
	return d
}

// mesh adds an xGMI edge between every two GPUs of m.
func (l *linker) mesh(path string, m fileMesh) {
	l.positive(path, m.BandwidthGBps)
	gpus := l.set(path, m.GPUs)
	if len(gpus) < 2 {
		l.b.errorf(path+".gpus", "a mesh needs at least two GPUs")
	}
	for x, a := range gpus {
		l.vendorIs(path, a, inventory.VendorAMD, inventory.LinkXGMI)
		for _, c := range gpus[x+1:] {
			l.pair(inventory.LinkXGMI, path, filePair{A: &a, B: &c, BandwidthGBps: m.BandwidthGBps})
		}
	}
}

// pair adds one edge of kind between p's two GPUs.
func (l *linker) pair(kind inventory.LinkKind, path string, p filePair) {
	if p.A == nil || p.B == nil {
		l.b.errorf(path, "a and b are required (GPU indices)")
		return
	}
	l.positive(path, p.BandwidthGBps)
	okA, okB := l.inRange(path+".a", *p.A), l.inRange(path+".b", *p.B)
	if !okA || !okB {
		return
	}
	if *p.A == *p.B {
		l.b.errorf(path+".b", "a link joins two different GPUs")
		return
	}
	e := edge{kind, min(*p.A, *p.B), max(*p.A, *p.B)}
	if prev, dup := l.pairs[e]; dup {
		l.b.errorf(path, "GPUs %d and %d are already linked at %s; give one edge the total bandwidth", e.lo, e.hi, prev)
		return
	}
	l.pairs[e] = path
	if kind == inventory.LinkNVLink {
		l.vendorIs(path+".a", *p.A, inventory.VendorNVIDIA, kind)
		l.vendorIs(path+".b", *p.B, inventory.VendorNVIDIA, kind)
	}
	l.b.m.Node.Links = append(l.b.m.Node.Links, inventory.Link{Kind: kind, A: *p.A, B: *p.B, BandwidthGBps: p.BandwidthGBps})
}
