package nccltopo

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"slices"

	"github.com/tessera-gpu/tessera/internal/gpuvendor"
	"github.com/tessera-gpu/tessera/internal/gpuvendor/vendors"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// ContainerPath is where a claim's containers find the file.
const ContainerPath = "/etc/tessera/nccl-topo.xml"

// FileEnv is the variable NCCL and RCCL read the file's path from.
const FileEnv = "NCCL_TOPO_FILE"

// NVSwitchTarget is the nvlink target of a link to an NVSwitch: the bus ID
// NCCL itself writes for a switch it cannot see. NCCL joins every NVSwitch
// link of a GPU to one switch node whatever the target, so the switch's own
// bus ID, which the inventory does not carry, would change nothing.
const NVSwitchTarget = "fffffff:ff:ff.0"

// NVSwitchClass and BridgeClass are the PCI classes of an NVSwitch and of a
// PCIe bridge (switch port).
const (
	NVSwitchClass = "0x068000"
	BridgeClass   = "0x060400"
)

// Options are what Build needs beyond the inventory.
type Options struct {
	// CPUArch is the cpu elements' arch (x86_64, arm64, ppc64); empty:
	// the agent's own, which is the node's.
	CPUArch string
}

// File is a claim's topology file.
type File struct {
	// XML is the file's bytes.
	XML []byte
	// Order is the claim's GPUs (indices into the node's GPUs) in rank
	// order: the order of CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES.
	Order []int
	// Vendor is the GPUs' vendor.
	Vendor inventory.Vendor
}

// Build writes the topology file of the claim's GPUs gpus (indices into
// n.GPUs, whole GPUs of one vendor, each once).
func Build(n *inventory.Node, gpus []int, o Options) (*File, error) {
	if len(gpus) == 0 {
		return nil, errors.New("no GPUs")
	}
	arch := o.CPUArch
	if arch == "" {
		arch = goarchToNCCL(runtime.GOARCH)
	}
	if !slices.Contains(cpuArches, arch) {
		return nil, fmt.Errorf("CPU architecture %q is none of %v", arch, cpuArches)
	}
	vendor, coll, err := checkGPUs(n, gpus)
	if err != nil {
		return nil, err
	}
	g := newGraph(n, gpus)
	ranks := g.order()
	rankOf := make([]int, len(gpus))
	for r, p := range ranks {
		rankOf[p] = r
	}

	sys := el("system", "version", coll.SystemVersion())
	cpus := map[int]*element{}
	pl := newPlacer(g)
	devOf := nvmlIndices(g)
	for _, p := range ranks {
		gpu := g.gpu(p)
		cpu := cpus[gpu.NUMANode]
		if cpu == nil {
			cpu = el("cpu", "numaid", itoa(gpu.NUMANode), "arch", arch)
			cpus[gpu.NUMANode] = cpu
		}
		dev := pl.parent(cpu, p).add(el("pci", "busid", gpu.PCIBusID, "class", coll.PCIClass(gpu), "link_speed", linkSpeed(gpu.Architecture), "link_width", itoa(linkWidth)))
		ge, err := gpuElement(g, coll, p, devOf[p], rankOf[p], ranks)
		if err != nil {
			return nil, err
		}
		dev.add(ge)
	}
	numas := make([]int, 0, len(cpus))
	for id := range cpus {
		numas = append(numas, id)
	}
	slices.Sort(numas)
	for _, id := range numas {
		sys.add(cpus[id])
	}

	var b bytes.Buffer
	b.Grow(256 + 512*len(gpus))
	sys.write(&b, 0)
	order := make([]int, len(ranks))
	for r, p := range ranks {
		order[r] = gpus[p]
	}
	return &File{XML: b.Bytes(), Order: order, Vendor: vendor}, nil
}

// gpuElement is the gpu element of the claim's p-th GPU with its links to
// the claim's other GPUs (in rank order) and to its NVSwitch planes.
func gpuElement(g *graph, c gpuvendor.Collective, p, dev, rank int, ranks []int) (*element, error) {
	gpu := g.gpu(p)
	attrs, err := c.GPUAttrs(gpu)
	if err != nil {
		return nil, err
	}
	// dev is the GPU's index in the container's management library (NVML,
	// ROCm SMI; nvmlIndices), which NCCL uses for its NVML lookups (P2P
	// status, the NIC each GPU uses), not its CUDA ordinal (rank).
	e := el("gpu", "dev", itoa(dev))
	for _, a := range attrs {
		e.attrs = append(e.attrs, attr{a[0], a[1]})
	}
	e.attrs = append(e.attrs, attr{"rank", itoa(rank)})

	tag := c.LinkTag()
	for _, l := range g.n.Links {
		if l.A != g.idx[p] || l.Kind != inventory.LinkNVSwitch {
			continue
		}
		e.add(el(tag, "target", NVSwitchTarget, "count", itoa(linkCount(c, gpu, l.BandwidthGBps)), "tclass", NVSwitchClass))
	}
	for _, q := range ranks {
		if q == p {
			continue
		}
		bw := pairBandwidth(g, p, q)
		if bw == 0 {
			continue
		}
		peer := g.gpu(q)
		e.add(el(tag, "target", peer.PCIBusID, "count", itoa(linkCount(c, gpu, bw)), "tclass", c.PCIClass(peer)))
	}
	return e, nil
}

// pairBandwidth is the direct NVLink or xGMI bandwidth between the claim's
// p-th and q-th GPUs, NVSwitch planes not counted.
func pairBandwidth(g *graph, p, q int) int64 {
	var bw int64
	for _, l := range g.n.Links {
		if l.Kind != inventory.LinkNVLink && l.Kind != inventory.LinkXGMI {
			continue
		}
		if (l.A == g.idx[p] && l.B == g.idx[q]) || (l.A == g.idx[q] && l.B == g.idx[p]) {
			bw += l.BandwidthGBps
		}
	}
	return bw
}

// switchGroups numbers the groups of the claim's GPUs that share a PCIe
// switch (joined by PCIe peer links) on one NUMA node; -1 for a GPU alone.
func switchGroups(g *graph) []int {
	grp := make([]int, len(g.idx))
	for i := range grp {
		grp[i] = -1
	}
	next := 0
	for p := range g.idx {
		if grp[p] >= 0 {
			continue
		}
		stack, members := []int{p}, []int{}
		grp[p] = next
		for len(stack) > 0 {
			a := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			members = append(members, a)
			for b := range g.idx {
				if grp[b] < 0 && g.pcie[a][b] && g.gpu(b).NUMANode == g.gpu(a).NUMANode {
					grp[b] = next
					stack = append(stack, b)
				}
			}
		}
		if len(members) == 1 {
			grp[p] = -1
			continue
		}
		next++
	}
	return grp
}

// checkGPUs refuses what no file can describe: an index out of range or
// twice, GPUs of two vendors, a bus ID NCCL would not match.
func checkGPUs(n *inventory.Node, gpus []int) (inventory.Vendor, gpuvendor.Collective, error) {
	seen := map[int]bool{}
	var (
		vendor inventory.Vendor
		coll   gpuvendor.Collective
	)
	for _, i := range gpus {
		if i < 0 || i >= len(n.GPUs) {
			return "", nil, fmt.Errorf("GPU %d does not exist (the node has %d)", i, len(n.GPUs))
		}
		if seen[i] {
			return "", nil, fmt.Errorf("GPU %d is listed twice", i)
		}
		seen[i] = true
		g := &n.GPUs[i]
		if vendor == "" {
			vendor = g.Vendor
		} else if g.Vendor != vendor {
			return "", nil, fmt.Errorf("the GPUs are of two vendors (%s, %s): NCCL and RCCL each see only their own", vendor, g.Vendor)
		}
		if coll = collectiveOf(g.Vendor); coll == nil {
			return "", nil, fmt.Errorf("GPU %s: no collective library for vendor %q", g.PCIBusID, g.Vendor)
		}
		if !validBusID(g.PCIBusID) {
			return "", nil, fmt.Errorf("GPU %d: bus ID %q is not a lowercase extended BDF (0000:18:00.0)", i, g.PCIBusID)
		}
		if g.NUMANode < -1 {
			return "", nil, fmt.Errorf("GPU %s: NUMA node %d", g.PCIBusID, g.NUMANode)
		}
	}
	return vendor, coll, nil
}

// collectiveOf is the vendor's collective library; nil for none.
func collectiveOf(v inventory.Vendor) gpuvendor.Collective {
	if gv, ok := vendors.For(v); ok {
		return gv.Collective()
	}
	return nil
}

var cpuArches = []string{"x86_64", "arm64", "ppc64"}

func goarchToNCCL(goarch string) string {
	switch goarch {
	case "amd64":
		return "x86_64"
	case "ppc64le", "ppc64":
		return "ppc64"
	default:
		return goarch
	}
}
