package publish_test

import (
	"context"
	"fmt"
	"math/rand"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/tessera-gpu/tessera/pkg/alloctest"
	"github.com/tessera-gpu/tessera/pkg/publish"
)

// BenchmarkFleet measures what the slices cost the scheduler: one
// scheduling cycle of a pod with one claim over a fleet of DGX H100 nodes,
// as kube-scheduler runs it with the real allocator: PreFilter builds one
// allocator over every slice of the fleet, Filter calls Allocate on every
// node (sequentially here; the scheduler spreads Filter over goroutines).
//
// Every node is filled beforehand to a pseudo-random level (about half its
// GPUs, some whole, some carrying 1g/2g/3g partitions), by the allocator
// itself so the state is one the scheduler could have reached; some nodes
// are full, most still fit the claim. ns/op is one cycle; us/node divides
// it by the nodes; fit-nodes is how many nodes the claim fits; scanned/node
// is how many devices per node the allocator looks at past its in-use
// check (each costs CEL), which is what Filter's cost grows with. Nodes are
// deep copies, as an informer cache holds them: a 1000-node dynamic fleet
// is about 1.4 GB of live heap.
func BenchmarkFleet(b *testing.B) {
	type claimCase struct {
		name  string
		claim func() *resourceapi.ResourceClaim
	}
	mig := claimCase{"1g.10gb", func() *resourceapi.ResourceClaim { return migClaim("bench", "1g.10gb") }}
	mig3 := claimCase{"3g.40gb", func() *resourceapi.ResourceClaim { return migClaim("bench", "3g.40gb") }}
	gpu := claimCase{"gpu", func() *resourceapi.ResourceClaim { return wholeClaim("bench") }}
	// dynamic-name is the same devices in name order (the NVIDIA DRA
	// driver's), to show what the order costs the scheduler.
	// dynamic-3 publishes three profiles only (--dynamic-profiles).
	modes := []struct {
		name     string
		mode     publish.Partitioning
		byName   bool
		profiles []string
	}{
		{"static", publish.Static, false, nil},
		{"dynamic", publish.Dynamic, false, nil},
		{"dynamic-name", publish.Dynamic, true, nil},
		{"dynamic-3", publish.Dynamic, false, []string{"1g.10gb", "3g.40gb", "7g.80gb"}},
	}
	for _, n := range []int{10, 100, 1000} {
		for _, m := range modes {
			cases := []claimCase{gpu}
			if m.mode == publish.Dynamic {
				// MIG slices exist only where the scheduler may carve them.
				cases = []claimCase{mig, mig3, gpu}
			}
			for _, cc := range cases {
				b.Run(fmt.Sprintf("nodes=%d/%s/claim=%s", n, m.name, cc.name), func(b *testing.B) {
					f := fleetOf(b, n, m.mode, m.byName, m.profiles)
					ctx := context.Background()
					claims := []*resourceapi.ResourceClaim{cc.claim()}
					fit, err := f.c.Cycle(ctx, f.nodes, claims)
					if err != nil {
						b.Fatal(err)
					}
					if fit == 0 || (n >= 100 && fit == n) {
						b.Fatalf("claim fits %d of %d nodes: the fleet does not exercise both outcomes", fit, n)
					}
					if want := f.expectedFit(b, ctx, cc.claim); fit != want {
						b.Fatalf("claim fits %d nodes of the fleet, %d by the template node's fill patterns: the clones are wrong", fit, want)
					}
					b.ReportAllocs()
					runtime.GC() // the fleet's construction garbage is not the cycle's
					for b.Loop() {
						if _, err := f.c.Cycle(ctx, f.nodes, claims); err != nil {
							b.Fatal(err)
						}
					}
					perCycle := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
					b.ReportMetric(perCycle/float64(n)/1e3, "us/node")
					b.ReportMetric(float64(f.devices), "devices/node")
					b.ReportMetric(float64(fit), "fit-nodes")
					b.ReportMetric(f.scanned(b, ctx, claims), "scanned/node")
				})
			}
		}
	}
}

// fleet is n cloned DGX H100 nodes, partly allocated.
type fleet struct {
	c       *alloctest.Cluster
	nodes   []*v1.Node
	devices int      // per node
	order   []string // a node's devices in published order
	// The template node the nodes were cloned from, its fill patterns and
	// which one each node got.
	template *alloctest.Cluster
	patterns [][]string
	assigned []int
}

// expectedFit counts the nodes a claim fits by allocating it on the
// template node once per fill pattern.
func (f *fleet) expectedFit(b *testing.B, ctx context.Context, claim func() *resourceapi.ResourceClaim) int {
	fits := make([]bool, len(f.patterns))
	for p, devs := range f.patterns {
		f.template.Allocated.Clear()
		for _, d := range devs {
			f.template.MarkAllocated(fleetTemplate, d)
		}
		got, err := f.template.Allocate(ctx, fleetTemplate, claim())
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
	for _, n := range f.nodes {
		res, err := a.Allocate(ctx, n, claims)
		if err != nil {
			b.Fatal(err)
		}
		stop := ""
		if res != nil {
			stop = res[0].Devices.Results[0].Device
		}
		for _, d := range f.order {
			if !f.c.Allocated.Has(structured.MakeDeviceID(alloctest.DriverName, n.Name, d)) {
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
// dgx-h100 nodes published with mode, each filled by one of a few fill
// patterns.
func fleetOf(b *testing.B, n int, mode publish.Partitioning, byName bool, profiles []string) *fleet {
	b.Helper()
	fleetsMu.Lock()
	defer fleetsMu.Unlock()
	key := fmt.Sprint(n, mode, byName, profiles)
	if f, ok := fleets[key]; ok {
		return f
	}
	// A 1000-node dynamic fleet holds about 1.4 GB of slices; keep one.
	clear(fleets)
	classes, err := alloctest.Classes()
	if err != nil {
		b.Fatal(err)
	}
	objs, res := alloctest.PublishSimWith(b, "dgx-h100", fleetTemplate, publish.Options{Partitioning: mode, Profiles: profiles})
	order := res.Order
	if byName {
		objs = reorderDevices(objs, func(a, b resourceapi.Device) int { return strings.Compare(a.Name, b.Name) })
		order = slices.Sorted(slices.Values(res.Order))
	}
	f := &fleet{devices: len(res.Order), order: order, template: alloctest.NewCluster(objs, classes)}
	f.patterns = fillPatterns(b, f.template, mode, 32, profiles)
	rng := rand.New(rand.NewSource(int64(n)))
	var all []*resourceapi.ResourceSlice
	for i := range n {
		name := fmt.Sprintf("dgx-h100-%04d", i)
		all = append(all, alloctest.CloneNode(objs, fleetTemplate, name)...)
		f.nodes = append(f.nodes, alloctest.Node(name))
		f.assigned = append(f.assigned, rng.Intn(len(f.patterns)))
	}
	f.c = alloctest.NewCluster(all, classes)
	for i, node := range f.nodes {
		for _, d := range f.patterns[f.assigned[i]] {
			f.c.MarkAllocated(node.Name, d)
		}
	}
	fleets[key] = f
	return f
}

// fillPatterns allocates k pseudo-random workloads on one node with the
// real allocator and returns each as its allocated device names. Static
// nodes get 0-8 whole GPUs; dynamic nodes get a mix of whole GPUs and
// 1g/2g/3g partitions up to 0-8 GPUs' worth of memory slices, about half
// the node on average.
func fillPatterns(b *testing.B, c *alloctest.Cluster, mode publish.Partitioning, k int, profiles []string) [][]string {
	b.Helper()
	ctx := context.Background()
	kinds := []struct {
		profile string // "" is a whole GPU
		slices  int    // memory slices
		weight  int
	}{{"", 8, 25}, {"1g.10gb", 1, 25}, {"1g.20gb", 2, 10}, {"2g.20gb", 2, 20}, {"3g.40gb", 4, 20}}
	if len(profiles) > 0 {
		// Only what the nodes publish, so fills reach the same depth.
		kinds = slices.DeleteFunc(kinds, func(k struct {
			profile string
			slices  int
			weight  int
		}) bool {
			return k.profile != "" && !slices.Contains(profiles, k.profile)
		})
		total := 0
		for _, k := range kinds {
			total += k.weight
		}
		for i := range kinds {
			kinds[i].weight = kinds[i].weight * 100 / total
		}
	}
	var out [][]string
	for p := range k {
		rng := rand.New(rand.NewSource(int64(p) + 1))
		c.Allocated.Clear()
		var devs []string
		alloc := func(claim *resourceapi.ResourceClaim) bool {
			got, err := c.Allocate(ctx, fleetTemplate, claim)
			if err != nil {
				b.Fatal(err)
			}
			if got == nil {
				return false
			}
			devs = append(devs, alloctest.Devices(got[0])...)
			return true
		}
		target := rng.Intn(9)
		if mode == publish.Static {
			for i := range target {
				if !alloc(wholeClaim(fmt.Sprint("fill", i))) {
					b.Fatalf("pattern %d: whole GPU %d did not fit", p, i)
				}
			}
			out = append(out, devs)
			continue
		}
		used, misses := 0, 0
		for i := 0; used < 8*target && misses < 5; i++ {
			r := rng.Intn(100)
			kind := kinds[0]
			for _, kd := range kinds {
				if r < kd.weight {
					kind = kd
					break
				}
				r -= kd.weight
			}
			claim := wholeClaim(fmt.Sprint("fill", i))
			if kind.profile != "" {
				claim = migClaim(fmt.Sprint("fill", i), kind.profile)
			}
			if alloc(claim) {
				used += kind.slices
			} else {
				misses++
			}
		}
		out = append(out, devs)
	}
	return out
}
