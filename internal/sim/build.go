package sim

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/tessera-gpu/tessera/internal/gpuvendor/vendors"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/pci"
)

// builder checks a decoded machine file and expands it into a Machine. It
// collects every error it finds (each naming its line and field path) so a
// human fixes a file in one round, not one error per run.
type builder struct {
	f        *fileMachine
	lines    lineIndex
	nodeName string
	errs     []*fieldError

	tables map[string][]inventory.PartitionProfile
	types  map[string]*gpuTypeSpec

	m        Machine
	gpuPaths []string // gpuPaths[i] is the gpus[j] entry GPU i came from
	// gpuGroups[i] is GPU i's iommuGroup as its entry gives it (nil: none).
	gpuGroups []*int
}

// gpuTypeSpec is a checked gpuTypes entry.
type gpuTypeSpec struct {
	gpu    inventory.GPU // template: no UUID, bus, minors or partitions
	driver string        // semver, "" when the type sets none
	// modeChange is how long a mode change takes (partitions that are a
	// GPU-wide mode).
	modeChange time.Duration
}

var (
	architectureRE = regexp.MustCompile(`^[a-z][a-z0-9]*$`)
	nvidiaUUIDRE   = regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	amdUUIDRE      = regexp.MustCompile(`^[0-9a-f]{16}$`)
)

// maxCount bounds count: so a typo cannot make a million GPUs.
const maxCount = 256

func (b *builder) errorf(path, format string, args ...any) {
	b.errs = append(b.errs, &fieldError{Line: b.lines.line(path), Path: path, Msg: fmt.Sprintf(format, args...)})
}

func build(f *fileMachine, lines lineIndex, fallbackName, nodeName string) (*Machine, []*fieldError) {
	b := &builder{f: f, lines: lines, nodeName: nodeName,
		tables: map[string][]inventory.PartitionProfile{}, types: map[string]*gpuTypeSpec{}}
	b.m.Name = f.Name
	if b.m.Name == "" {
		b.m.Name = fallbackName
	}
	b.m.Description = f.Description
	b.m.Cgroup = Cgroup{Version: 2}
	if c := f.Cgroup; c != nil {
		b.m.Cgroup = Cgroup{Version: c.Version, Dmem: c.Dmem}
		if c.Version != 1 && c.Version != 2 {
			b.errorf("cgroup.version", "%d is not a cgroup version (1 or 2)", c.Version)
		} else if c.Version == 1 && c.Dmem {
			b.errorf("cgroup.dmem", "the dmem controller needs cgroup version 2")
		}
	}
	b.m.NodeName = nodeName
	if f.DriverVersion != "" && SemverFromDriver(f.DriverVersion) == "" {
		b.errorf("driverVersion", "%q is not a driver version (want e.g. 580.65.06)", f.DriverVersion)
	}
	b.profileTables()
	b.gpuTypes()
	b.gpus()
	b.uniqueness()
	b.partitionMinors()
	b.links()
	b.pci()
	sort.SliceStable(b.errs, func(i, j int) bool { return b.errs[i].Line < b.errs[j].Line })
	if len(b.errs) > 0 {
		return nil, b.errs
	}
	return &b.m, nil
}

// parseMemory reads bytes or a Kubernetes quantity (80Gi, 81559Mi).
func (b *builder) parseMemory(path, s string) int64 {
	if s == "" {
		b.errorf(path, "is required (bytes or a Kubernetes quantity such as 80Gi)")
		return 0
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		b.errorf(path, "%q is not a quantity (want bytes or a Kubernetes quantity such as 80Gi)", s)
		return 0
	}
	v, ok := q.AsInt64()
	if !ok {
		v = q.Value() // fractional bytes round up
	}
	if v <= 0 {
		b.errorf(path, "%q must be more than 0 bytes", s)
	}
	return v
}

func (b *builder) engines(path string, e map[string]int64) map[string]int64 {
	for _, k := range slices.Sorted(maps.Keys(e)) {
		if e[k] < 0 {
			b.errorf(path+"."+k, "%d must not be negative", e[k])
		}
	}
	return maps.Clone(e)
}

func (b *builder) profileTables() {
	for _, name := range slices.Sorted(maps.Keys(b.f.ProfileTables)) {
		rows := b.f.ProfileTables[name]
		base := "profileTables." + name
		if len(rows) == 0 {
			b.errorf(base, "a profile table needs at least one profile")
		}
		out := make([]inventory.PartitionProfile, 0, len(rows))
		seen := map[string]int{}
		for i, r := range rows {
			path := fmt.Sprintf("%s[%d]", base, i)
			if r.Name == "" {
				b.errorf(path+".name", "is required")
			} else if j, dup := seen[r.Name]; dup {
				b.errorf(path+".name", "profile %q is already defined at %s[%d]", r.Name, base, j)
			}
			seen[r.Name] = i
			p := inventory.PartitionProfile{
				Name:          r.Name,
				MemoryBytes:   b.parseMemory(path+".memory", r.Memory),
				ComputeUnits:  r.ComputeUnits,
				MemorySlices:  r.MemorySlices,
				ComputeSlices: r.ComputeSlices,
				Engines:       b.engines(path+".engines", r.Engines),
				MaxInstances:  r.MaxInstances,
			}
			if r.ComputeUnits <= 0 {
				b.errorf(path+".computeUnits", "must be more than 0")
			}
			if r.MemorySlices <= 0 {
				b.errorf(path+".memorySlices", "must be more than 0")
			}
			if r.ComputeSlices <= 0 {
				b.errorf(path+".computeSlices", "must be more than 0")
			}
			if r.MaxInstances < 0 {
				b.errorf(path+".maxInstances", "must not be negative")
			}
			if len(r.Placements) == 0 {
				b.errorf(path+".placements", "a profile needs at least one placement start")
			}
			for k, s := range r.Placements {
				if s < 0 {
					b.errorf(fmt.Sprintf("%s.placements[%d]", path, k), "start %d must not be negative", s)
				} else if slices.Contains(r.Placements[:k], s) {
					b.errorf(fmt.Sprintf("%s.placements[%d]", path, k), "start %d is listed twice", s)
				}
				p.Placements = append(p.Placements, inventory.Placement{Start: s, Size: r.MemorySlices})
			}
			out = append(out, p)
		}
		b.tables[name] = out
	}
}

func (b *builder) gpuTypes() {
	for _, name := range slices.Sorted(maps.Keys(b.f.GPUTypes)) {
		t := b.f.GPUTypes[name]
		path := "gpuTypes." + name
		spec := &gpuTypeSpec{}
		g := &spec.gpu
		_, known := vendors.For(inventory.Vendor(t.Vendor))
		switch {
		case known:
			g.Vendor = inventory.Vendor(t.Vendor)
		case t.Vendor == "":
			b.errorf(path+".vendor", "is required (%s)", vendorNames())
		default:
			b.errorf(path+".vendor", "%q is not a vendor (want %s)", t.Vendor, vendorNames())
		}
		g.Model, g.ProductName = t.Model, t.ProductName
		if t.Model == "" {
			b.errorf(path+".model", "is required (short and stable: H100, A100, MI300X)")
		}
		if t.ProductName == "" {
			b.errorf(path+".productName", "is required (as the driver reports it)")
		}
		g.Architecture = t.Architecture
		if !architectureRE.MatchString(t.Architecture) {
			b.errorf(path+".architecture", "%q is not a lowercase one-word architecture (hopper, ampere, cdna3)", t.Architecture)
		}
		if t.DriverVersion != "" {
			if spec.driver = SemverFromDriver(t.DriverVersion); spec.driver == "" {
				b.errorf(path+".driverVersion", "%q is not a driver version (want e.g. 580.65.06)", t.DriverVersion)
			}
		}
		switch g.Vendor {
		case inventory.VendorNVIDIA:
			if g.ComputeCapability = semverFromDotted(t.ComputeCapability); g.ComputeCapability == "" {
				b.errorf(path+".computeCapability", "%q is not a compute capability (want e.g. 9.0)", t.ComputeCapability)
			}
			if t.GFXVersion != "" {
				b.errorf(path+".gfxVersion", "is for AMD GPUs only")
			}
		case inventory.VendorAMD:
			if g.GFXVersion = semverFromDotted(t.GFXVersion); g.GFXVersion == "" {
				b.errorf(path+".gfxVersion", "%q is not a gfx version (want e.g. 9.4.2 for gfx942)", t.GFXVersion)
			}
			if t.ComputeCapability != "" {
				b.errorf(path+".computeCapability", "is for NVIDIA GPUs only")
			}
		}
		g.MemoryBytes = b.parseMemory(path+".memory", t.Memory)
		g.ComputeUnits = t.ComputeUnits
		if t.ComputeUnits <= 0 {
			b.errorf(path+".computeUnits", "must be more than 0")
		}
		g.Engines = b.engines(path+".engines", t.Engines)
		if t.Partitioning != nil {
			g.Partitioning = b.partitioning(path+".partitioning", g, t.Partitioning)
			spec.modeChange = b.modes(path+".partitioning", g, t.Partitioning)
		}
		b.types[name] = spec
	}
}

func (b *builder) partitioning(path string, g *inventory.GPU, p *filePartitioning) *inventory.Partitioning {
	out := &inventory.Partitioning{
		Kind:                 inventory.PartitionKind(p.Kind),
		Enabled:              p.Enabled,
		ModeChangeNeedsReset: p.ModeChangeNeedsReset,
		MemorySlices:         p.MemorySlices,
		ComputeSlices:        p.ComputeSlices,
	}
	kinds := partitionKinds()
	switch {
	case out.Kind != "" && out.Kind == vendors.Capabilities(g.Vendor).PartitionKind:
	case slices.Contains(kinds, string(out.Kind)):
		b.errorf(path+".kind", "%s partitioning does not exist on %s GPUs", p.Kind, g.Vendor)
	default:
		b.errorf(path+".kind", "%q is not a partitioning kind (want %s)", p.Kind, strings.Join(kinds, " or "))
	}
	if p.MemorySlices <= 0 {
		b.errorf(path+".memorySlices", "must be more than 0")
	}
	if p.ComputeSlices <= 0 {
		b.errorf(path+".computeSlices", "must be more than 0")
	}
	table, ok := b.tables[p.Profiles]
	if !ok {
		b.errorf(path+".profiles", "profile table %q does not exist (profileTables has: %v)", p.Profiles, slices.Sorted(maps.Keys(b.tables)))
		return out
	}
	for i, pr := range table {
		rowPath := fmt.Sprintf("profileTables.%s[%d]", p.Profiles, i)
		if pr.MemorySlices > p.MemorySlices {
			b.errorf(rowPath+".memorySlices", "%d is more than the %d memory slices of %s", pr.MemorySlices, p.MemorySlices, path)
		}
		if pr.ComputeSlices > p.ComputeSlices {
			b.errorf(rowPath+".computeSlices", "%d is more than the %d compute slices of %s", pr.ComputeSlices, p.ComputeSlices, path)
		}
		// A partition is part of its GPU: never more memory or compute.
		if g.MemoryBytes > 0 && pr.MemoryBytes > g.MemoryBytes {
			b.errorf(rowPath+".memory", "%s is more than the %s memory of %s", resource.NewQuantity(pr.MemoryBytes, resource.BinarySI), resource.NewQuantity(g.MemoryBytes, resource.BinarySI), strings.TrimSuffix(path, ".partitioning"))
		}
		if g.ComputeUnits > 0 && pr.ComputeUnits > g.ComputeUnits {
			b.errorf(rowPath+".computeUnits", "%d is more than the %d compute units of %s", pr.ComputeUnits, g.ComputeUnits, strings.TrimSuffix(path, ".partitioning"))
		}
		for k, pl := range pr.Placements {
			if pl.Start+pl.Size > p.MemorySlices {
				b.errorf(fmt.Sprintf("%s.placements[%d]", rowPath, k), "placement %d:%d runs past the %d memory slices of %s", pl.Start, pl.Size, p.MemorySlices, path)
			}
		}
	}
	out.Profiles = slices.Clone(table)
	return out
}

func (b *builder) gpus() {
	if len(b.f.GPUs) == 0 {
		b.errorf("gpus", "a machine needs at least one GPU")
	}
	perVendor := map[inventory.Vendor]int{}
	for j, e := range b.f.GPUs {
		path := fmt.Sprintf("gpus[%d]", j)
		spec, ok := b.types[e.Type]
		if e.Type == "" {
			b.errorf(path+".type", "is required (a gpuTypes entry)")
			continue
		}
		if !ok {
			b.errorf(path+".type", "GPU type %q does not exist (gpuTypes has: %v)", e.Type, slices.Sorted(maps.Keys(b.f.GPUTypes)))
			continue
		}
		count := 1
		if e.Count != nil {
			count = *e.Count
			if count < 1 || count > maxCount {
				b.errorf(path+".count", "%d is out of range (1-%d)", count, maxCount)
				continue
			}
			if count > 1 {
				for field, set := range map[string]bool{"uuid": e.UUID != "", "pciBusID": e.PCIBusID != "", "minor": e.Minor != nil, "renderMinor": e.RenderMinor != nil} {
					if set {
						b.errorf(path+"."+field, "cannot be set when count is more than 1 (each GPU needs its own); list the GPUs one by one")
					}
				}
			}
		}
		for k := 0; k < count; k++ {
			b.gpu(path, e, spec, perVendor[spec.gpu.Vendor])
			perVendor[spec.gpu.Vendor]++
		}
	}
}

// gpu expands one GPU of entry e; vendorIndex counts earlier GPUs of its
// vendor (the default minor).
func (b *builder) gpu(path string, e fileGPU, spec *gpuTypeSpec, vendorIndex int) {
	idx := len(b.m.Node.GPUs)
	g := spec.gpu.Clone()
	g.Partitions = nil
	g.Health = inventory.Health{State: inventory.Healthy}

	switch {
	case e.DriverVersion != "":
		if g.DriverVersion = SemverFromDriver(e.DriverVersion); g.DriverVersion == "" {
			b.errorf(path+".driverVersion", "%q is not a driver version (want e.g. 580.65.06)", e.DriverVersion)
		}
	case spec.driver != "":
		g.DriverVersion = spec.driver
	case b.f.DriverVersion != "":
		g.DriverVersion = SemverFromDriver(b.f.DriverVersion)
	default:
		b.errorf(path+".driverVersion", "is required here, in its gpuTypes entry or at the top of the file")
	}

	g.UUID = e.UUID
	switch {
	case g.UUID == "":
		g.UUID = gpuUUID(g.Vendor, b.nodeName, b.m.Name, idx)
	case g.Vendor == inventory.VendorNVIDIA && !nvidiaUUIDRE.MatchString(g.UUID):
		b.errorf(path+".uuid", "%q is not an NVIDIA GPU UUID (want GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, lowercase hex)", g.UUID)
	case g.Vendor == inventory.VendorAMD && !amdUUIDRE.MatchString(g.UUID):
		b.errorf(path+".uuid", "%q is not an AMD unique id (want 16 lowercase hex digits)", g.UUID)
	}

	b.pciePlace(path, e, idx, &g)
	g.NUMANode = -1
	if e.NUMANode != nil {
		if g.NUMANode = *e.NUMANode; g.NUMANode < -1 {
			b.errorf(path+".numaNode", "%d is not a NUMA node (want -1 for none, or 0 and up)", g.NUMANode)
		}
	}
	g.Minor = vendorIndex
	if e.Minor != nil {
		if g.Minor = *e.Minor; g.Minor < 0 || g.Minor > 254 {
			// nvidiactl is minor 255 of the nvidia major.
			b.errorf(path+".minor", "%d is out of range (0-254)", g.Minor)
		}
	}
	if g.Vendor == inventory.VendorAMD {
		g.RenderMinor = 128 + vendorIndex
		if e.RenderMinor != nil {
			if g.RenderMinor = *e.RenderMinor; g.RenderMinor < 128 || g.RenderMinor > 255 {
				b.errorf(path+".renderMinor", "%d is out of range (128-255, renderD<N>)", g.RenderMinor)
			}
		}
	} else if e.RenderMinor != nil {
		b.errorf(path+".renderMinor", "only AMD GPUs have render nodes")
	}

	if e.PartitioningEnabled != nil {
		if g.Partitioning == nil {
			b.errorf(path+".partitioningEnabled", "GPU type %s cannot be partitioned", e.Type)
		} else {
			g.Partitioning.Enabled = *e.PartitioningEnabled
		}
	}
	b.m.Node.GPUs = append(b.m.Node.GPUs, g)
	b.gpuPaths = append(b.gpuPaths, path)
	b.gpuGroups = append(b.gpuGroups, e.IOMMUGroup)
	b.initialPartitions(path, e, idx)
	b.initialMode(path, idx)
	if spec.modeChange > 0 {
		if b.m.ModeChangeTime == nil {
			b.m.ModeChangeTime = map[string]time.Duration{}
		}
		b.m.ModeChangeTime[g.UUID] = spec.modeChange
	}
}

// initialPartitions cuts the partitions a machine file lists, with the same
// rules CreatePartition applies.
func (b *builder) initialPartitions(path string, e fileGPU, idx int) {
	g := &b.m.Node.GPUs[idx]
	for i, fp := range e.Partitions {
		ppath := fmt.Sprintf("%s.partitions[%d]", path, i)
		if fp.Profile == "" {
			b.errorf(ppath+".profile", "is required")
			continue
		}
		if fp.Start == nil {
			b.errorf(ppath+".start", "is required (the placement start slot)")
			continue
		}
		if g.Partitioning != nil && !g.Partitioning.Enabled {
			b.errorf(ppath, "GPU %d (%s) has partitioning disabled; set partitioningEnabled: true on the GPU or enabled: true in its type", idx, g.ProductName)
			continue
		}
		p, err := planPartition(g, fp.Profile, inventory.Placement{Start: *fp.Start})
		if err != nil {
			b.errorf(ppath, "%v", err)
			continue
		}
		id, err := gpuInstanceID(g, p.Placement)
		if err != nil {
			b.errorf(ppath, "%v", err)
			continue
		}
		p.GPUInstanceID = id
		p.UUID = partitionUUID(p.Kind, g.UUID, "machine", strconv.Itoa(i))
		g.Partitions = append(g.Partitions, p)
	}
	sortPartitions(g.Partitions)
}

// uniqueness checks what must differ between GPUs. Minors are per vendor:
// /dev/nvidia<N> and /dev/dri/card<N> are separate namespaces.
func (b *builder) uniqueness() {
	type key struct{ kind, value string }
	seen := map[key]int{}
	check := func(i int, field, kind, value string) {
		k := key{kind, value}
		if j, dup := seen[k]; dup {
			b.errorf(b.gpuPaths[i]+"."+field, "%s is already used by GPU %d (%s)%s", value, j, b.gpuPaths[j], b.expandedNote(i))
			return
		}
		seen[k] = i
	}
	for i, g := range b.m.Node.GPUs {
		check(i, "pciBusID", "bus", g.PCIBusID)
		check(i, "uuid", "uuid", g.UUID)
		check(i, "minor", string(g.Vendor)+"-minor", strconv.Itoa(g.Minor))
		if g.Vendor == inventory.VendorAMD {
			check(i, "renderMinor", "render", strconv.Itoa(g.RenderMinor))
		}
	}
}

func (b *builder) expandedNote(i int) string {
	if i > 0 && b.gpuPaths[i] == b.gpuPaths[i-1] || i+1 < len(b.gpuPaths) && b.gpuPaths[i] == b.gpuPaths[i+1] {
		return fmt.Sprintf(" (this is GPU %d, expanded from count)", i)
	}
	return ""
}

// partitionMinors gives AMD partitions of the machine file their own card
// and render nodes, after every GPU has its own.
func (b *builder) partitionMinors() {
	if len(b.errs) > 0 {
		return
	}
	for i := range b.m.Node.GPUs {
		g := &b.m.Node.GPUs[i]
		for k := range g.Partitions {
			if p := &g.Partitions[k]; p.Kind == inventory.PartitionXCP {
				p.Minor, p.RenderMinor = xcpMinors(&b.m.Node, g, p.GPUInstanceID)
			}
		}
	}
}

// vendorNames lists the vendors a machine file can name: "nvidia or amd".
func vendorNames() string {
	var names []string
	for _, v := range vendors.All() {
		names = append(names, string(v.Name()))
	}
	return strings.Join(names, " or ")
}

// partitionKinds lists the vendors' partitioning kinds: mig, xcp.
func partitionKinds() []string {
	var kinds []string
	for _, v := range vendors.All() {
		if k := v.Capabilities().PartitionKind; k != "" {
			kinds = append(kinds, string(k))
		}
	}
	return kinds
}

// pciePlace sets g's bus ID, root complex and bridges from e, the idx-th
// GPU entry at path: a bus ID generated where none is listed, the root of
// the bus ID's domain where none is listed, the bridges as listed.
func (b *builder) pciePlace(path string, e fileGPU, idx int, g *inventory.GPU) {
	if e.PCIBusID == "" {
		// Generated ids are only for quick test machines; real ones are
		// listed. A clash with a listed id is reported by uniqueness().
		g.PCIBusID = fmt.Sprintf("0000:%02x:00.0", (0x10+idx)&0xff)
	} else if id, ok := normalizePCIBusID(e.PCIBusID); ok {
		g.PCIBusID = id
	} else {
		b.errorf(path+".pciBusID", "%q is not a PCI bus ID (want DDDD:BB:DD.F)", e.PCIBusID)
	}
	g.PCIeRoot = e.PCIeRoot
	if g.PCIeRoot == "" && g.PCIBusID != "" {
		g.PCIeRoot = "pci" + g.PCIBusID[:len(g.PCIBusID)-8] + ":00"
	} else if e.PCIeRoot != "" && !pci.IsRoot(e.PCIeRoot) {
		b.errorf(path+".pcieRoot", "%q is not a PCIe root (want pciDDDD:BB, lowercase hex)", e.PCIeRoot)
	}
	for i, br := range e.PCIeBridges {
		id, ok := normalizePCIBusID(br)
		if !ok {
			b.errorf(fmt.Sprintf("%s.pcieBridges[%d]", path, i), "%q is not a PCI bus ID (want DDDD:BB:DD.F)", br)
			continue
		}
		g.PCIeBridges = append(g.PCIeBridges, id)
	}
}
