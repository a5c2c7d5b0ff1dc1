package publish_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
)

// xcpClaim is a claim for n compute partitions of mode on one GPU, as a
// user writes it: the xcp class and CEL on the partition's mode (its
// profile).
func xcpClaim(name, mode string, n int64) *resourceapi.ResourceClaim {
	c := alloctest.Claim(name, req("xcp.gpu.tessera.dev", n, fmt.Sprintf(profileIs, mode), fmt.Sprintf(modelIs, "MI300X")))
	if n > 1 {
		c = alloctest.MatchAttribute(c, "gpu.tessera.dev/parentUUID")
	}
	return c
}

func amdWholeClaim(name string) *resourceapi.ResourceClaim {
	return alloctest.Claim(name, req("amd.gpu.tessera.dev", 1))
}

// TestModeClaimsAllocate: on a dynamic MI300X node the real allocator
// gives "one CPX partition of an MI300X" and "a DPX half" through the xcp
// class, each on a GPU of its own (their modes cannot mix), fills a GPU
// with eight CPX partitions, and gives no whole GPU or other mode there.
func TestModeClaimsAllocate(t *testing.T) {
	ctx := context.Background()
	c, _ := dynamicCluster(t, "mi300x-8")
	gpuOf := func(r []resourceapi.AllocationResult) string {
		return modeGPU(alloctest.Devices(r[0])[0])
	}
	cpx, err := c.Allocate(ctx, "mi300x-8", xcpClaim("cpx", "CPX", 1))
	if err != nil || cpx == nil {
		t.Fatalf("one CPX partition: %v, %v", cpx, err)
	}
	dpx, err := c.Allocate(ctx, "mi300x-8", xcpClaim("dpx", "DPX", 1))
	if err != nil || dpx == nil {
		t.Fatalf("a DPX half: %v, %v", dpx, err)
	}
	if gpuOf(cpx) == gpuOf(dpx) {
		t.Fatalf("CPX %v and DPX %v on one GPU", alloctest.Devices(cpx[0]), alloctest.Devices(dpx[0]))
	}
	seven, err := c.Allocate(ctx, "mi300x-8", xcpClaim("seven", "CPX", 7))
	if err != nil || seven == nil {
		t.Fatalf("seven more CPX partitions on one GPU: %v, %v", seven, err)
	}
	if gpuOf(seven) != gpuOf(cpx) {
		t.Logf("seven CPX partitions on %s, the first on %s", gpuOf(seven), gpuOf(cpx))
	}
	// Nine on one GPU never fit; eight on an idle one do.
	if got, err := c.Allocate(ctx, "mi300x-8", xcpClaim("nine", "CPX", 9)); err != nil || got != nil {
		t.Fatalf("nine CPX partitions on one GPU: %v, %v", got, err)
	}
}

// modeGPU is the gpu-<n> of a device name of a GPU of modes.
func modeGPU(device string) string {
	var n int
	if _, err := fmt.Sscanf(device, "gpu-%d", &n); err != nil {
		panic(device)
	}
	return fmt.Sprintf("gpu-%d", n)
}

// modeNode is an mi300x-8 node whose mode changes are done at once, and
// what it publishes as the agent would: after each allocation the
// hardware is brought where prepare brings it (a GPU with claims in their
// mode, an idle one at rest) and the node republished, with the window.
type modeNode struct {
	t     testing.TB
	node  string
	hw    *sim.Backend
	inv   *inventory.Node
	every *publish.Result // all devices, for their GPU and carve
	win   *publish.Result // the last windowed publish
	// held: allocated devices, by name.
	held map[string]bool
	// stay: settle leaves an idle GPU in the mode it is in, as a rest that
	// failed or an operator's mode does, rather than at rest.
	stay bool
}

func newModeNode(t *testing.T) *modeNode { return newModeNodeTB(t, "mi300x-8") }

func (n *modeNode) discover() {
	var err error
	if n.inv, err = n.hw.Discover(context.Background()); err != nil {
		n.t.Fatal(err)
	}
}

// settle brings every GPU to the mode its held devices need, or to rest
// (unless stay), and returns how many GPUs changed mode.
func (n *modeNode) settle() int {
	want := map[string]string{}
	for d := range n.held {
		e := n.every.Devices[d]
		mode := publish.RestMode(e.GPU)
		if e.Carve != nil {
			mode = e.Carve.Profile
		}
		if w, ok := want[e.GPU.UUID]; ok && w != mode {
			n.t.Fatalf("GPU %s holds devices of modes %s and %s", e.GPU.UUID, w, mode)
		}
		want[e.GPU.UUID] = mode
	}
	changed := 0
	for _, g := range n.inv.GPUs {
		mode, ok := want[g.UUID]
		switch {
		case !ok && n.stay:
			continue
		case !ok:
			mode = publish.RestMode(&g)
		}
		if mode == g.Partitioning.Mode {
			continue
		}
		if err := n.hw.SwitchMode(context.Background(), g.UUID, mode); err != nil {
			n.t.Fatal(err)
		}
		changed++
	}
	n.discover()
	return changed
}

// options adds to opts what the agent knows of the node: the partitions
// and whole GPUs claims hold, and the GPUs open before (a window).
func (n *modeNode) options(opts publish.Options) publish.Options {
	opts.Held = func(gpu string, p *inventory.Partition) bool {
		for d := range n.held {
			e := n.every.Devices[d]
			if e.GPU.UUID == gpu && e.Carve != nil && e.Carve.Profile == p.Profile && e.Carve.Placement == p.Placement {
				return true
			}
		}
		return false
	}
	opts.HeldWhole = func(gpu string) bool {
		for d := range n.held {
			if e := n.every.Devices[d]; e.GPU.UUID == gpu && e.Carve == nil {
				return true
			}
		}
		return false
	}
	if n.win != nil && opts.Window > 0 {
		open := n.win.Open
		opts.Open = func(gpu string) bool { return open[gpu] }
	}
	return opts
}

// cluster republishes the node with opts as the agent does and returns
// the allocator's view of it, the held devices allocated.
func (n *modeNode) cluster(opts publish.Options) *alloctest.Cluster {
	n.t.Helper()
	res, err := publish.Build(n.node, n.inv, n.options(opts))
	if err != nil {
		n.t.Fatal(err)
	}
	if opts.Window > 0 {
		n.win = res
	}
	for d := range n.held {
		if _, ok := res.Devices[d]; !ok {
			n.t.Fatalf("allocated device %s unpublished", d)
		}
	}
	classes, err := alloctest.Classes()
	if err != nil {
		n.t.Fatal(err)
	}
	c := alloctest.NewCluster(publish.Objects(names.DriverName, n.node, res.Resources), classes)
	for d := range n.held {
		c.MarkAllocated(n.node, d)
	}
	return c
}

// publish is cluster with a window of w (0: every GPU's placements).
func (n *modeNode) publish(w int) *alloctest.Cluster {
	return n.cluster(publish.Options{Partitioning: publish.Dynamic, Window: w})
}

// checkNoDoubleBooking: on every GPU the allocated devices are the whole
// GPU alone, or partitions of one mode at distinct placements.
func (n *modeNode) checkNoDoubleBooking(step string) {
	n.t.Helper()
	type use struct {
		whole int
		modes map[string][]int
	}
	by := map[string]*use{}
	for d := range n.held {
		e := n.every.Devices[d]
		u := by[e.GPU.UUID]
		if u == nil {
			u = &use{modes: map[string][]int{}}
			by[e.GPU.UUID] = u
		}
		if e.Carve == nil {
			u.whole++
			continue
		}
		if slices.Contains(u.modes[e.Carve.Profile], e.Carve.Placement.Start) {
			n.t.Fatalf("%s: %s placement %d allocated twice", step, e.Carve.Profile, e.Carve.Placement.Start)
		}
		u.modes[e.Carve.Profile] = append(u.modes[e.Carve.Profile], e.Carve.Placement.Start)
	}
	for gpu, u := range by {
		if u.whole > 1 || (u.whole == 1 && len(u.modes) > 0) || len(u.modes) > 1 {
			n.t.Fatalf("%s: GPU %s double-booked: whole %d, partitions %v", step, gpu, u.whole, u.modes)
		}
	}
}

// fits reports whether a GPU could take a claim of count partitions of
// mode (whole: mode "") given what is allocated: the oracle the allocator
// is held to for a single-GPU claim.
func (n *modeNode) fits(mode string, count int) bool {
	for _, g := range n.inv.GPUs {
		var whole bool
		modes := map[string]int{}
		for d := range n.held {
			if e := n.every.Devices[d]; e.GPU.UUID == g.UUID {
				if e.Carve == nil {
					whole = true
				} else {
					modes[e.Carve.Profile]++
				}
			}
		}
		switch {
		case whole:
		case mode == "":
			if len(modes) == 0 {
				return true
			}
		case len(modes) == 0 || modes[mode] > 0:
			if pr := g.Partitioning.Profile(mode); pr != nil && len(pr.Placements)-modes[mode] >= count {
				return true
			}
		}
	}
	return false
}

// TestModeNeverDoubleBooks: random claims (whole GPUs, one or several
// partitions of one mode on one GPU) allocated by the real allocator on a
// dynamic MI300X node republished after each as the agent does (hardware
// following the claims, a window of 2), and released at random: no GPU is
// ever double-booked, no allocated device is ever unpublished, and a claim
// fails only where no GPU could take it. The same holds where idle GPUs
// stay in the mode their last claim left (stay): they count as idle for the
// window, and a closed one publishes none of its mode's partitions.
func TestModeNeverDoubleBooks(t *testing.T) {
	for _, stay := range []bool{false, true} {
		t.Run(fmt.Sprintf("stay=%v", stay), func(t *testing.T) { neverDoubleBooks(t, stay) })
	}
}

func neverDoubleBooks(t *testing.T, stay bool) {
	ctx := context.Background()
	shapes := []struct {
		mode  string
		count int
	}{{"", 1}, {"CPX", 1}, {"CPX", 3}, {"CPX", 8}, {"QPX", 1}, {"QPX", 4}, {"DPX", 1}, {"DPX", 2}}
	allocs := 0
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 47))
		n := newModeNode(t)
		n.stay = stay
		var claims [][]string
		for step := range 40 {
			name := fmt.Sprintf("seed %d step %d", seed, step)
			if len(claims) > 0 && rng.IntN(3) == 0 {
				k := rng.IntN(len(claims))
				for _, d := range claims[k] {
					delete(n.held, d)
				}
				claims = slices.Delete(claims, k, k+1)
				n.settle()
				continue
			}
			sh := shapes[rng.IntN(len(shapes))]
			c := n.publish(2)
			claim := amdWholeClaim("x")
			if sh.mode != "" {
				claim = xcpClaim("x", sh.mode, int64(sh.count))
			}
			// The window may close a GPU a claim needs; with everything
			// published it must fit exactly when the oracle says so.
			all := n.publish(0)
			got, err := all.Allocate(ctx, "mi300x-8", claim)
			if err != nil {
				t.Fatal(err)
			}
			if want := n.fits(sh.mode, sh.count); (got != nil) != want {
				t.Fatalf("%s: %s x%d allocated %v, a GPU could take it: %v", name, sh.mode, sh.count, got != nil, want)
			}
			if wg, err := c.Allocate(ctx, "mi300x-8", claim); err != nil || (wg != nil && got == nil) {
				t.Fatalf("%s: with the window %v (%v), without %v", name, wg != nil, err, got != nil)
			}
			if got == nil {
				continue
			}
			allocs++
			devs := alloctest.Devices(got[0])
			for _, d := range devs {
				n.held[d] = true
			}
			claims = append(claims, devs)
			n.checkNoDoubleBooking(name)
			n.settle()
		}
	}
	if allocs < 60 {
		t.Errorf("only %d allocations: the sequence does not exercise the node", allocs)
	}
}
