package publish_test

import (
	"context"
	"fmt"
	"math/rand"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// BenchmarkFleet measures what the slices cost the scheduler: one
// scheduling cycle of a pod with one claim over a fleet of DGX H100 nodes,
// as kube-scheduler runs it with the real allocator: PreFilter builds one
// allocator over every slice of the fleet, Filter calls Allocate on every
// node (sequentially here; the scheduler spreads Filter over goroutines).
//
// Layouts: Tessera static (the whole-GPU layout: eight devices), Tessera
// dynamic (every MIG placement), dynamic-3 (--dynamic-profiles with three
// profiles), and nvidia: the NVIDIA DRA driver's DynamicMIG layout of the
// same machine with its own DeviceClasses (alloctest.NVIDIALayout), the
// reference the dynamic layout is held to.
//
// Fills: empty, or every node filled beforehand to a pseudo-random level
// (about half its GPUs, some whole, some carrying 1g/2g/3g partitions) by
// the allocator itself, so the state is one the scheduler could have
// reached; some nodes are then full, most still fit the claim.
//
// ns/op is one cycle; us/node divides it by the nodes; fit-nodes is how
// many nodes the claim fits; scanned/node is how many devices per node the
// allocator looks at past its in-use check (each costs CEL), which is what
// Filter's cost grows with beyond building the node's pool. Nodes are deep
// copies, as an informer cache holds them: a 1000-node dynamic fleet is
// about 1.4 GB of live heap.
func BenchmarkFleet(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		for _, l := range fleetLayouts {
			for _, fill := range []string{"empty", "half"} {
				for _, kind := range l.claims {
					b.Run(fmt.Sprintf("nodes=%d/%s/fill=%s/claim=%s", n, l.name, fill, kind), func(b *testing.B) {
						f := fleetOf(b, n, l, fill == "half")
						ctx := context.Background()
						claims := []*resourceapi.ResourceClaim{l.claim("bench", kind)}
						fit, err := f.c.Cycle(ctx, f.nodes, claims)
						if err != nil {
							b.Fatal(err)
						}
						switch {
						case fill == "empty" && fit != n:
							b.Fatalf("claim fits %d of %d empty nodes", fit, n)
						case fill == "half" && (fit == 0 || (n >= 100 && fit == n)):
							b.Fatalf("claim fits %d of %d nodes: the fleet does not exercise both outcomes", fit, n)
						}
						if want := f.expectedFit(b, ctx, func() *resourceapi.ResourceClaim { return l.claim("bench", kind) }); fit != want {
							b.Fatalf("claim fits %d nodes of the fleet, %d by the template node's fill patterns: the clones are wrong", fit, want)
						}
						b.ReportAllocs()
						runtime.GC() // the fleet's construction garbage is not the cycle's
						cpu := cpuTime()
						for b.Loop() {
							if _, err := f.c.Cycle(ctx, f.nodes, claims); err != nil {
								b.Fatal(err)
							}
						}
						perCycle := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
						b.ReportMetric(perCycle/float64(n)/1e3, "us/node")
						// CPU time is steadier than wall time on a shared machine.
						b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N)/float64(n)/1e3, "cpu-us/node")
						b.ReportMetric(float64(f.devices), "devices/node")
						b.ReportMetric(float64(fit), "fit-nodes")
						b.ReportMetric(f.scanned(b, ctx, claims), "scanned/node")
					})
				}
			}
		}
	}
}

// A fleetLayout is how every node of a fleet publishes its DGX H100, and
// the claims its users write for it.
type fleetLayout struct {
	name   string
	driver string
	claims []string // claim kinds benchmarked: "gpu" or a MIG profile
	// publish returns the template node's slices with the partitions of
	// devices (device names of the empty node's slices) carved, as its
	// agent publishes them once it prepared claims on them; the NVIDIA
	// layout does not change with what is carved.
	publish func(b *testing.B, devices []string) []*resourceapi.ResourceSlice
	// kinds are what fills draw from: "gpu" or a profile, with the memory
	// slices each takes and its weight.
	kinds []fillKind
	claim func(name, kind string) *resourceapi.ResourceClaim
	// republish: fills allocate from the slices the agent publishes after
	// each claim before (a window follows what is carved and held).
	republish bool
}

type fillKind struct {
	kind   string // "gpu" or a profile
	slices int    // memory slices
	weight int
}

var (
	migKinds = []fillKind{{"gpu", 8, 25}, {"1g.10gb", 1, 25}, {"1g.20gb", 2, 10}, {"2g.20gb", 2, 20}, {"3g.40gb", 4, 20}}
	// The kinds dynamic-3 publishes, weights rescaled to 100.
	mig3Kinds = []fillKind{{"gpu", 8, 35}, {"1g.10gb", 1, 35}, {"3g.40gb", 4, 30}}

	tesseraClaim = func(name, kind string) *resourceapi.ResourceClaim {
		if kind == "gpu" {
			return wholeClaim(name)
		}
		return migClaim(name, kind)
	}
	tesseraLayout = func(opts publish.Options) func(b *testing.B, devices []string) []*resourceapi.ResourceSlice {
		return func(b *testing.B, devices []string) []*resourceapi.ResourceSlice {
			return occupiedSlices(b, "dgx-h100", opts, devices)
		}
	}
	fleetLayouts = []fleetLayout{
		{name: "static", driver: names.DriverName, claims: []string{"gpu"}, publish: tesseraLayout(publish.Options{Partitioning: publish.Static}),
			kinds: []fillKind{{"gpu", 8, 100}}, claim: tesseraClaim},
		// The static MIG reference: dgx-h100-mig, GPUs 6 and 7 cut by an
		// operator (7x 1g.10gb; 3g.40gb, 2g.20gb, 2x 1g.10gb), published
		// as they are.
		{name: "static-mig", driver: names.DriverName, claims: []string{"1g.10gb", "3g.40gb"},
			publish: func(b *testing.B, devices []string) []*resourceapi.ResourceSlice {
				return occupiedSlices(b, "dgx-h100-mig", publish.Options{Partitioning: publish.Static}, devices)
			},
			kinds: []fillKind{{"gpu", 8, 40}, {"1g.10gb", 1, 40}, {"3g.40gb", 4, 20}}, claim: tesseraClaim},
		{name: "dynamic", driver: names.DriverName, claims: []string{"gpu", "1g.10gb", "3g.40gb"}, publish: tesseraLayout(publish.Options{Partitioning: publish.Dynamic}),
			kinds: migKinds, claim: tesseraClaim},
		{name: "dynamic-window", driver: names.DriverName, claims: []string{"gpu", "1g.10gb", "3g.40gb"},
			publish: tesseraLayout(publish.Options{Partitioning: publish.Dynamic, Window: 2}), kinds: migKinds, claim: tesseraClaim, republish: true},
		{name: "dynamic-3", driver: names.DriverName, claims: []string{"gpu", "1g.10gb", "3g.40gb"},
			publish: tesseraLayout(publish.Options{Partitioning: publish.Dynamic, Profiles: []string{"1g.10gb", "3g.40gb", "7g.80gb"}}),
			kinds:   mig3Kinds, claim: tesseraClaim},
		{name: "nvidia", driver: alloctest.NVIDIADriverName, claims: []string{"gpu", "1g.10gb", "3g.40gb"}, publish: nvidiaTemplate,
			kinds: migKinds, claim: nvidiaClaim},
	}
)

// occupiedSlices publishes a dgx-h100 with opts after carving the
// partitions of devices in order (a claim holding a whole GPU carves
// nothing and holds it whole), republishing after each as the agent does,
// from a node where it never ran: a window opens from the build before.
func occupiedSlices(b *testing.B, machine string, opts publish.Options, devices []string) []*resourceapi.ResourceSlice {
	ctx := context.Background()
	hw, inv := alloctest.DiscoverSim(b, machine, fleetTemplate)
	every, err := publish.Build(fleetTemplate, inv, publish.Options{Partitioning: opts.Partitioning})
	if err != nil {
		b.Fatal(err)
	}
	whole := map[string]bool{}
	opts.HeldWhole = func(uuid string) bool { return whole[uuid] }
	var res *publish.Result
	build := func() {
		if res != nil {
			open := res.Open
			opts.Open = func(gpu string) bool { return open[gpu] }
		} else {
			opts.Open = func(string) bool { return false }
		}
		if res, err = publish.Build(fleetTemplate, inv, opts); err != nil {
			b.Fatal(err)
		}
	}
	build()
	for _, d := range devices {
		e, ok := every.Devices[d]
		if !ok {
			b.Fatalf("no device %s", d)
		}
		if _, published := res.Devices[d]; !published {
			b.Fatalf("device %s was allocated but is not published", d)
		}
		if e.Carve == nil {
			whole[e.GPU.UUID] = true
		} else {
			if err := hw.SetPartitionMode(ctx, e.GPU.UUID, true); err != nil {
				b.Fatal(err)
			}
			if _, err := hw.CreatePartition(ctx, e.GPU.UUID, e.Carve.Profile, e.Carve.Placement); err != nil {
				b.Fatal(err)
			}
			if inv, err = hw.Discover(ctx); err != nil {
				b.Fatal(err)
			}
		}
		if opts.Window > 0 {
			build()
		}
	}
	build()
	return publish.Objects(names.DriverName, fleetTemplate, res.Resources)
}

func nvidiaTemplate(b *testing.B, _ []string) []*resourceapi.ResourceSlice {
	_, inv := alloctest.DiscoverSim(b, "dgx-h100", fleetTemplate)
	objs, err := alloctest.NVIDIALayout(fleetTemplate, inv)
	if err != nil {
		b.Fatal(err)
	}
	return objs
}

// nvidiaClaim is a claim as the NVIDIA driver's users write it.
func nvidiaClaim(name, kind string) *resourceapi.ResourceClaim {
	if kind == "gpu" {
		return alloctest.Claim(name, req("gpu.nvidia.com", 1))
	}
	return alloctest.Claim(name, req("mig.nvidia.com", 1, fmt.Sprintf(`device.attributes["gpu.nvidia.com"].profile == %q`, kind)))
}

// fleet is n cloned DGX H100 nodes, partly allocated.
type fleet struct {
	c       *alloctest.Cluster
	driver  string
	nodes   []*v1.Node
	devices int // per node
	// The fill patterns (devices allocated), the template node each
	// pattern's nodes were cloned from (published with the pattern's
	// partitions carved), its devices in the order the allocator scans them,
	// and which pattern each node got.
	patterns  [][]string
	templates []*alloctest.Cluster
	orders    [][]string
	assigned  []int
}

// expectedFit counts the nodes a claim fits by allocating it on the
// template node once per fill pattern.
func (f *fleet) expectedFit(b *testing.B, ctx context.Context, claim func() *resourceapi.ResourceClaim) int {
	fits := make([]bool, len(f.patterns))
	for p, devs := range f.patterns {
		t := f.templates[p]
		t.Allocated.Clear()
		for _, d := range devs {
			t.Allocated.Insert(structured.MakeDeviceID(f.driver, fleetTemplate, d))
		}
		got, err := t.Allocate(ctx, fleetTemplate, claim())
		if err != nil {
			b.Fatal(err)
		}
		fits[p] = got != nil
	}
	n := 0
	for _, p := range f.assigned {
		if fits[p] {
			n++
		}
	}
	return n
}

// scanned returns how many devices per node the allocator examines beyond
// the cheap in-use check (CEL selectors, then counters) before it finds
// the first fit, or all free ones where none fits: what Filter's cost
// grows with.
func (f *fleet) scanned(b *testing.B, ctx context.Context, claims []*resourceapi.ResourceClaim) float64 {
	a, err := f.c.NewAllocator(ctx)
	if err != nil {
		b.Fatal(err)
	}
	total := 0
	for i, n := range f.nodes {
		res, err := a.Allocate(ctx, n, claims)
		if err != nil {
			b.Fatal(err)
		}
		stop := ""
		if res != nil {
			stop = res[0].Devices.Results[0].Device
		}
		for _, d := range f.orders[f.assigned[i]] {
			if !f.c.Allocated.Has(structured.MakeDeviceID(f.driver, n.Name, d)) {
				total++
			}
			if d == stop {
				break
			}
		}
	}
	return float64(total) / float64(len(f.nodes))
}

const fleetTemplate = "template"

var (
	fleetsMu sync.Mutex
	fleets   = map[string]*fleet{}
)

// fleetOf builds (once per process, so -count reuses it) a fleet of n
// dgx-h100 nodes published with layout l, empty or each filled by one of
// a few fill patterns.
func fleetOf(b *testing.B, n int, l fleetLayout, filled bool) *fleet {
	b.Helper()
	fleetsMu.Lock()
	defer fleetsMu.Unlock()
	key := fmt.Sprint(n, l.name, filled)
	if f, ok := fleets[key]; ok {
		return f
	}
	// A 1000-node dynamic fleet holds about 1.4 GB of slices; keep one.
	clear(fleets)
	classes, err := alloctest.Classes()
	if err != nil {
		b.Fatal(err)
	}
	classes = append(classes, alloctest.NVIDIAClasses()...)
	empty := l.publish(b, nil)
	f := &fleet{driver: l.driver, devices: len(scanOrder(empty)), patterns: [][]string{nil}}
	if filled {
		f.patterns = fillPatterns(b, alloctest.NewCluster(empty, classes), l, 32)
	}
	objs := make([][]*resourceapi.ResourceSlice, len(f.patterns))
	for p, devs := range f.patterns {
		objs[p] = l.publish(b, devs)
		f.templates = append(f.templates, alloctest.NewCluster(objs[p], classes))
		f.orders = append(f.orders, scanOrder(objs[p]))
	}
	rng := rand.New(rand.NewSource(int64(n)))
	var all []*resourceapi.ResourceSlice
	for i := range n {
		name := fmt.Sprintf("dgx-h100-%04d", i)
		f.assigned = append(f.assigned, rng.Intn(len(f.patterns)))
		all = append(all, alloctest.CloneNode(objs[f.assigned[i]], fleetTemplate, name)...)
		f.nodes = append(f.nodes, alloctest.Node(name))
	}
	f.c = alloctest.NewCluster(all, classes)
	for i, node := range f.nodes {
		for _, d := range f.patterns[f.assigned[i]] {
			f.c.Allocated.Insert(structured.MakeDeviceID(l.driver, node.Name, d))
		}
	}
	fleets[key] = f
	return f
}

// scanOrder is a node's devices in the order the allocator scans them:
// slices by name, devices in slice order.
func scanOrder(objs []*resourceapi.ResourceSlice) []string {
	sorted := slices.Clone(objs)
	slices.SortFunc(sorted, func(a, b *resourceapi.ResourceSlice) int { return strings.Compare(a.Name, b.Name) })
	var out []string
	for _, s := range sorted {
		for _, d := range s.Spec.Devices {
			out = append(out, d.Name)
		}
	}
	return out
}

// fillPatterns allocates k pseudo-random workloads on one node with the
// real allocator and returns each as its allocated device names: kinds
// drawn by weight up to 0-8 GPUs' worth of memory slices, about half the
// node on average.
func fillPatterns(b *testing.B, c *alloctest.Cluster, l fleetLayout, k int) [][]string {
	b.Helper()
	ctx := context.Background()
	var out [][]string
	for p := range k {
		rng := rand.New(rand.NewSource(int64(p) + 1))
		c.Allocated.Clear()
		var devs []string
		target := rng.Intn(9)
		used, misses := 0, 0
		for i := 0; used < 8*target && misses < 5; i++ {
			r := rng.Intn(100)
			kind := l.kinds[0]
			for _, kd := range l.kinds {
				if r < kd.weight {
					kind = kd
					break
				}
				r -= kd.weight
			}
			if l.republish {
				c = alloctest.NewCluster(l.publish(b, devs), c.Classes)
				for _, d := range devs {
					c.MarkAllocated(fleetTemplate, d)
				}
			}
			got, err := c.Allocate(ctx, fleetTemplate, l.claim(fmt.Sprint("fill", i), kind.kind))
			if err != nil {
				b.Fatal(err)
			}
			if got == nil {
				misses++
				continue
			}
			devs = append(devs, alloctest.Devices(got[0])...)
			used += kind.slices
		}
		out = append(out, devs)
	}
	return out
}

// cpuTime is the process's user and system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
