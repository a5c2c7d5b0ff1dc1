package publish_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

func TestOpenGPUs(t *testing.T) {
	g := func(name string, rank int, flags string) publish.WindowGPU {
		return publish.WindowGPU{Name: name, Rank: rank,
			Touched: strings.Contains(flags, "t"), HeldWhole: strings.Contains(flags, "w"),
			WasOpen: strings.Contains(flags, "o"), Pinned: strings.Contains(flags, "p")}
	}
	tests := []struct {
		name string
		gpus []publish.WindowGPU
		k    int
		want []string
	}{
		{"no window opens all", []publish.WindowGPU{g("a", 0, ""), g("b", 1, "w")}, 0, []string{"a", "b"}},
		{"fresh node: the last k in rank order", []publish.WindowGPU{g("a", 0, ""), g("b", 3, ""), g("c", 1, ""), g("d", 2, "")}, 2, []string{"b", "d"}},
		{"touched GPUs do not count", []publish.WindowGPU{g("a", 0, ""), g("b", 3, "t"), g("c", 1, ""), g("d", 2, "")}, 2, []string{"b", "c", "d"}},
		{"sticky beyond k", []publish.WindowGPU{g("a", 0, "o"), g("b", 3, "o"), g("c", 1, "o"), g("d", 2, "")}, 2, []string{"a", "b", "c"}},
		{"held whole closes, the next opens", []publish.WindowGPU{g("a", 0, ""), g("b", 3, "ow"), g("c", 1, ""), g("d", 2, "o")}, 2, []string{"c", "d"}},
		{"held whole and touched cannot close a touched GPU", []publish.WindowGPU{g("a", 0, "tw")}, 2, []string{"a"}},
		{"pinned GPUs are always open and count", []publish.WindowGPU{g("a", 0, "p"), g("b", 3, ""), g("c", 1, "")}, 2, []string{"a", "b"}},
		{"fewer GPUs than k", []publish.WindowGPU{g("a", 0, ""), g("b", 1, "w")}, 2, []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := slices.Sorted(maps.Keys(publish.OpenGPUs(tt.gpus, tt.k)))
			if !slices.Equal(got, tt.want) {
				t.Errorf("open %v, want %v", got, tt.want)
			}
		})
	}
}

// windowed is a dynamic node with a window of 2.
func windowed(open func(string) bool, heldWhole func(string) bool) publish.Options {
	o := dynamic
	o.Window, o.Open, o.HeldWhole = 2, open, heldWhole
	return o
}

func none(string) bool { return false }

// TestWindowFreshNode: an empty DGX H100 with a window of 2 publishes 8
// whole GPUs and the placements of the two GPUs first fit fills first, and
// first fit takes for every profile the device it takes with everything
// published. Eight 1g.10gb claims allocated from the same slices (the
// scheduler placing pods faster than the agent republishes) all land on
// the node; the window holds 14.
func TestWindowFreshNode(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	classes, err := alloctest.Classes()
	if err != nil {
		t.Fatal(err)
	}
	_, inv := alloctest.DiscoverSim(t, "dgx-h100", "dgx-h100")
	for i := range inv.GPUs {
		inv.GPUs[i].Partitions = nil
	}
	build := func(o publish.Options) *alloctest.Cluster {
		res, err := publish.Build("dgx-h100", inv, o)
		if err != nil {
			t.Fatal(err)
		}
		return alloctest.NewCluster(publish.Objects(names.DriverName, "dgx-h100", res.Resources), classes)
	}
	res, err := publish.Build("dgx-h100", inv, windowed(none, nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Order) != 8+2*25 {
		t.Errorf("%d devices, want 8 whole GPUs and 2x25 placements", len(res.Order))
	}
	if open := slices.Sorted(maps.Keys(res.Open)); len(open) != 2 {
		t.Errorf("open GPUs %v, want 2", open)
	}
	if len(res.LeftOut) != 6*25 {
		t.Errorf("%d placements left out, want 150", len(res.LeftOut))
	}
	// Closed GPUs keep their counter sets, and their placements' place in
	// a slice, empty: opening a GPU changes that one slice.
	var sets, devSlices, wholeOnly int
	for _, s := range res.Resources.Pools["dgx-h100"].Slices {
		sets += len(s.SharedCounters)
		if len(s.SharedCounters) == 0 {
			devSlices++
			if len(s.Devices) == 1 {
				wholeOnly++
			}
		}
	}
	if sets != 8 || devSlices != 8 || wholeOnly != 6 {
		t.Errorf("%d counter sets, %d device slices (%d with a whole GPU only); want 8 sets, 8 slices, 6 without placements (the closed GPUs')", sets, devSlices, wholeOnly)
	}
	every, err := publish.Build("dgx-h100", inv, dynamic)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := len(res.Resources.Pools["dgx-h100"].Slices), len(every.Resources.Pools["dgx-h100"].Slices); a != b {
		t.Errorf("%d slices with the window, %d without", a, b)
	}
	for _, kind := range []string{"gpu", "1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"} {
		claim := func() *resourceapi.ResourceClaim { return tesseraClaim("c", kind) }
		all, err := build(dynamic).Allocate(ctx, "dgx-h100", claim())
		if err != nil {
			t.Fatal(err)
		}
		win, err := build(windowed(none, nil)).Allocate(ctx, "dgx-h100", claim())
		if err != nil {
			t.Fatal(err)
		}
		if all == nil || win == nil || !slices.Equal(alloctest.Devices(all[0]), alloctest.Devices(win[0])) {
			t.Errorf("%s: all published took %v, the window %v", kind, all, win)
		}
	}
	c := build(windowed(none, nil))
	for i := range 15 {
		got, err := c.Allocate(ctx, "dgx-h100", migClaim(fmt.Sprint("p", i), "1g.10gb"))
		if err != nil {
			t.Fatal(err)
		}
		if fits := got != nil; fits != (i < 14) {
			t.Errorf("1g.10gb claim %d before a republish: fits %v, want %v", i+1, fits, i < 14)
		}
	}
}

// nodeState is a dynamic DGX H100 after some claims: the hardware with the
// claims' partitions carved, the allocations of the claims held, and which
// GPUs are held whole or were open before.
type nodeState struct {
	inv       *inventory.Node
	held      []resourceapi.AllocationResult
	heldWhole map[string]bool // by UUID
	wasOpen   map[string]bool // by device name
}

// randomState allocates up to steps random claims with everything
// published and carves each (prepares them all), then draws which GPUs a
// window had opened before: any of them may have been.
func randomState(t *testing.T, ctx context.Context, rng *rand.Rand, steps int) nodeState {
	t.Helper()
	classes, err := alloctest.Classes()
	if err != nil {
		t.Fatal(err)
	}
	hw := migBackend(t, ctx, "dgx-h100")
	st := nodeState{heldWhole: map[string]bool{}, wasOpen: map[string]bool{}}
	kinds := []string{"gpu", "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}
	for i := range steps {
		inv, err := hw.Discover(ctx)
		if err != nil {
			t.Fatal(err)
		}
		res, err := publish.Build("dgx-h100", inv, dynamic)
		if err != nil {
			t.Fatal(err)
		}
		c := alloctest.NewCluster(publish.Objects(names.DriverName, "dgx-h100", res.Resources), classes)
		for _, h := range st.held {
			c.MarkResult("dgx-h100", h)
		}
		kind := kinds[rng.IntN(len(kinds))]
		claim := tesseraClaim(fmt.Sprint("s", i), kind)
		got, err := c.Allocate(ctx, "dgx-h100", claim)
		if err != nil {
			t.Fatal(err)
		}
		if got == nil {
			continue
		}
		st.held = append(st.held, got[0])
		e := res.Devices[alloctest.Devices(got[0])[0]]
		if e.Carve == nil {
			st.heldWhole[e.GPU.UUID] = true
			continue
		}
		if _, err := hw.CreatePartition(ctx, e.GPU.UUID, e.Carve.Profile, e.Carve.Placement); err != nil {
			t.Fatal(err)
		}
	}
	if st.inv, err = hw.Discover(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range st.inv.GPUs {
		if rng.IntN(4) == 0 {
			st.wasOpen[names.GPU(i)] = true
		}
	}
	return st
}

// cluster is the state's node published with o, its claims allocated.
func (st nodeState) cluster(t *testing.T, o publish.Options) (*alloctest.Cluster, *publish.Result) {
	t.Helper()
	classes, err := alloctest.Classes()
	if err != nil {
		t.Fatal(err)
	}
	res, err := publish.Build("dgx-h100", st.inv, o)
	if err != nil {
		t.Fatal(err)
	}
	c := alloctest.NewCluster(publish.Objects(names.DriverName, "dgx-h100", res.Resources), classes)
	for _, h := range st.held {
		for _, d := range h.Devices.Results {
			if _, ok := res.Devices[d.Device]; !ok {
				t.Fatalf("held device %s is not published", d.Device)
			}
		}
		c.MarkResult("dgx-h100", h)
	}
	return c, res
}

// Window exclusions: claims that fit a node with every placement published
// and not with the window. docs/performance.md lists them.
const (
	// exclWideClaim: one claim needs placements on more GPUs without
	// partitions than the window opens (3x 7g.80gb, 15x 1g.10gb on an empty
	// node). It waits for the agent to open more, which it does only as
	// the open GPUs fill; raise --dynamic-window, or set it to 0.
	exclWideClaim = "needs more untouched GPUs than are open"
	// exclPinned: the claim's selector names where its placement must be
	// (a NUMA node, a PCIe root, a GPU) and that GPU is closed.
	exclPinned = "pinned to a closed GPU"
)

// TestWindowKeepsClaimsSatisfiable: over random node states (partitions
// carved, GPUs held whole, any GPUs open before), every claim shape that
// fits the node with every placement published also fits with a window of
// 2, or is one of the exclusions above, checked by its reason: the
// allocation with everything published uses more untouched GPUs than the
// window opens, or a GPU the window closed for a claim pinned to it. No
// claim fits with the window and not without.
func TestWindowKeepsClaimsSatisfiable(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	mig := func(profile string) string { return fmt.Sprintf(profileIs, profile) }
	const parent = "gpu.tessera.dev/parentUUID"
	shapes := []struct {
		name   string
		claim  func() *resourceapi.ResourceClaim
		pinned bool
	}{
		{name: "1g.10gb", claim: func() *resourceapi.ResourceClaim { return migClaim("x", "1g.10gb") }},
		{name: "3g.40gb", claim: func() *resourceapi.ResourceClaim { return migClaim("x", "3g.40gb") }},
		{name: "7x 1g.10gb on one GPU", claim: func() *resourceapi.ResourceClaim {
			return alloctest.MatchAttribute(alloctest.Claim("x", req("mig.gpu.tessera.dev", 7, mig("1g.10gb"))), parent)
		}},
		{name: "2x 3g.40gb on one GPU", claim: func() *resourceapi.ResourceClaim {
			return alloctest.MatchAttribute(alloctest.Claim("x", req("mig.gpu.tessera.dev", 2, mig("3g.40gb"))), parent)
		}},
		{name: "2x 7g.80gb", claim: func() *resourceapi.ResourceClaim {
			return alloctest.Claim("x", req("mig.gpu.tessera.dev", 2, mig("7g.80gb")))
		}},
		{name: "3x 7g.80gb", claim: func() *resourceapi.ResourceClaim {
			return alloctest.Claim("x", req("mig.gpu.tessera.dev", 3, mig("7g.80gb")))
		}},
		{name: "8x 1g.10gb", claim: func() *resourceapi.ResourceClaim {
			return alloctest.Claim("x", req("mig.gpu.tessera.dev", 8, mig("1g.10gb")))
		}},
		{name: "15x 1g.10gb", claim: func() *resourceapi.ResourceClaim {
			return alloctest.Claim("x", req("mig.gpu.tessera.dev", 15, mig("1g.10gb")))
		}},
		{name: "2 whole GPUs and 2x 1g.10gb", claim: func() *resourceapi.ResourceClaim {
			return alloctest.Claim("x", alloctest.Request{Name: "whole", Class: "nvidia.gpu.tessera.dev", Count: 2},
				alloctest.Request{Name: "mig", Class: "mig.gpu.tessera.dev", Count: 2, CEL: []string{mig("1g.10gb")}})
		}},
		{name: "5 whole GPUs and a 3g.40gb", claim: func() *resourceapi.ResourceClaim {
			return alloctest.Claim("x", alloctest.Request{Name: "whole", Class: "nvidia.gpu.tessera.dev", Count: 5},
				alloctest.Request{Name: "mig", Class: "mig.gpu.tessera.dev", Count: 1, CEL: []string{mig("3g.40gb")}})
		}},
		{name: "2x 1g.10gb on different GPUs", claim: func() *resourceapi.ResourceClaim {
			return alloctest.DistinctAttribute(alloctest.Claim("x", req("mig.gpu.tessera.dev", 2, mig("1g.10gb"))), parent)
		}},
		{name: "a 1g.10gb or a whole GPU", claim: func() *resourceapi.ResourceClaim {
			return alloctest.FirstAvailable("x", alloctest.Request{Name: "mig", Class: "mig.gpu.tessera.dev", CEL: []string{mig("1g.10gb")}},
				alloctest.Request{Name: "whole", Class: "nvidia.gpu.tessera.dev"})
		}},
		{name: "a 1g.10gb on NUMA node 0", pinned: true, claim: func() *resourceapi.ResourceClaim {
			return alloctest.Claim("x", req("mig.gpu.tessera.dev", 1, mig("1g.10gb"), `device.attributes["resource.kubernetes.io"].numaNode == 0`))
		}},
	}
	hits := map[string]int{}
	cases, fitAll := 0, 0
	for seed := range uint64(24) {
		rng := rand.New(rand.NewPCG(seed, 30))
		st := randomState(t, ctx, rng, rng.IntN(24))
		for _, sh := range shapes {
			cases++
			all, _ := st.cluster(t, dynamic)
			win, wres := st.cluster(t, windowed(func(g string) bool { return st.wasOpen[g] }, func(u string) bool { return st.heldWhole[u] }))
			ga, err := all.Allocate(ctx, "dgx-h100", sh.claim())
			if err != nil {
				t.Fatal(err)
			}
			gw, err := win.Allocate(ctx, "dgx-h100", sh.claim())
			if err != nil {
				t.Fatal(err)
			}
			if ga != nil {
				fitAll++
			}
			switch {
			case ga == nil && gw != nil:
				t.Errorf("seed %d %s: fits with the window (%v) and not with everything published", seed, sh.name, alloctest.Devices(gw[0]))
			case ga != nil && gw == nil:
				reason := exclusion(st, wres, ga[0], sh.pinned)
				if reason == "" {
					t.Errorf("seed %d %s: fits with everything published (%v), not with the window (open %v), and is no exclusion",
						seed, sh.name, alloctest.Devices(ga[0]), slices.Sorted(maps.Keys(wres.Open)))
					continue
				}
				hits[reason]++
			}
		}
	}
	t.Logf("%d cases, %d fit with everything published; exclusions hit: %v", cases, fitAll, hits)
	if hits[exclWideClaim] == 0 {
		t.Errorf("no case needed more untouched GPUs than the window opens: the shapes do not exercise it")
	}
}

// exclusion returns the exclusion an allocation made with everything
// published falls under, given what the window published (res): "" for
// none.
func exclusion(st nodeState, res *publish.Result, alloc resourceapi.AllocationResult, pinned bool) string {
	byName := map[string]*inventory.GPU{}
	for i := range st.inv.GPUs {
		for name, e := range res.Devices {
			if e.GPU == &st.inv.GPUs[i] && e.Carve == nil && e.Partition == nil {
				byName[name] = e.GPU
			}
		}
	}
	untouched := map[string]bool{} // used by the allocation, by GPU name
	closed := false
	for _, d := range alloc.Devices.Results {
		gpu, _, isPart := strings.Cut(d.Device, "-mig-")
		if !isPart {
			continue
		}
		if !res.Open[gpu] {
			closed = true
		}
		if g := byName[gpu]; g != nil && len(g.Partitions) == 0 {
			untouched[gpu] = true
		}
	}
	openUntouched := 0
	for gpu := range res.Open {
		if g := byName[gpu]; g != nil && len(g.Partitions) == 0 {
			openUntouched++
		}
	}
	switch {
	case len(untouched) > openUntouched:
		return exclWideClaim
	case pinned && closed:
		return exclPinned
	}
	return ""
}
