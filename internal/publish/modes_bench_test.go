package publish_test

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
)

// AMD layouts of BenchmarkFleet: every node an mi300x-8, published static
// (eight whole GPUs in SPX), dynamic (each GPU whole and the partitions of
// DPX, QPX and CPX, on 32 token counters: modes.go) and dynamic with a
// window of 2, filled by whole GPUs and partitions of the three modes.
func init() {
	amdKinds := []fillKind{{"gpu", 8, 25}, {"CPX", 1, 40}, {"QPX", 2, 20}, {"DPX", 4, 15}}
	fleetLayouts = append(fleetLayouts,
		fleetLayout{name: "amd-static", driver: names.DriverName, claims: []string{"gpu"},
			publish: modeLayout(publish.Options{Partitioning: publish.Static}), kinds: []fillKind{{"gpu", 8, 100}}, claim: amdClaim},
		fleetLayout{name: "amd-dynamic", driver: names.DriverName, claims: []string{"gpu", "CPX", "DPX"},
			publish: modeLayout(publish.Options{Partitioning: publish.Dynamic}), kinds: amdKinds, claim: amdClaim},
		fleetLayout{name: "amd-dynamic-window", driver: names.DriverName, claims: []string{"gpu", "CPX", "DPX"},
			publish: modeLayout(publish.Options{Partitioning: publish.Dynamic, Window: 2}), kinds: amdKinds, claim: amdClaim, republish: true},
	)
}

// amdClaim is a claim as a user of an AMD node writes it: a whole GPU, or
// one partition of a mode.
func amdClaim(name, kind string) *resourceapi.ResourceClaim {
	if kind == "gpu" {
		return amdWholeClaim(name)
	}
	return alloctest.Claim(name, req("xcp.gpu.tessera.dev", 1, fmt.Sprintf(profileIs, kind)))
}

// modeLayout publishes the fleet's mi300x-8 template with opts once the
// claims of devices are prepared: each GPU in the mode of its partitions
// (or whole), published as the agent does once they are prepared.
func modeLayout(opts publish.Options) func(b *testing.B, devices []string) []*resourceapi.ResourceSlice {
	return func(b *testing.B, devices []string) []*resourceapi.ResourceSlice {
		n := newModeNodeTB(b, fleetTemplate)
		var err error
		for _, d := range devices {
			n.held[d] = true
		}
		n.settle()
		if opts.Window > 0 {
			// A node where the agent never ran: the window opens from a
			// build where no GPU was open, as occupiedSlices'.
			first := opts
			first.Open = func(string) bool { return false }
			if n.win, err = publish.Build(fleetTemplate, n.inv, n.options(first)); err != nil {
				b.Fatal(err)
			}
		}
		res, err := publish.Build(fleetTemplate, n.inv, n.options(opts))
		if err != nil {
			b.Fatal(err)
		}
		for _, d := range devices {
			if _, ok := res.Devices[d]; !ok {
				b.Fatalf("allocated device %s is not published", d)
			}
		}
		return publish.Objects(names.DriverName, fleetTemplate, res.Resources)
	}
}

// The churn workload of an AMD node: on one mi300x-8, one claim arrives per
// event for a whole GPU or one partition of a mode, and leaves after an
// exponential lifetime; the mean offers about the node's 64 XCDs.
var modeChurnMix = []struct {
	kind   string // a mode, or wholeKind
	xcds   int
	weight int
}{{"CPX", 1, 45}, {"QPX", 2, 25}, {"DPX", 4, 15}, {wholeKind, 8, 15}}

const modeChurnEvents = 600

// BenchmarkChurnModes runs the churn on an AMD dynamic node with the real
// allocator throughout, the node republished after every change with a
// window of 2 and its GPUs' modes following the claims (each mode change
// counted), and records the share of claims placed (placed-%), of
// XCD-events served (served-%), the refusals per seed where the node had
// the XCDs free but on GPUs in other modes or partly held
// (mode-refusals), and the mode changes per placed claim.
func BenchmarkChurnModes(b *testing.B) {
	var placed, arrived, served, offered, modeRefusals, changes int
	for b.Loop() {
		placed, arrived, served, offered, modeRefusals, changes = 0, 0, 0, 0, 0, 0
		for seed := int64(1); seed <= churnSeeds; seed++ {
			s := runModeChurn(b, seed)
			placed += s.placed
			arrived += s.arrived
			served += s.served
			offered += s.offered
			modeRefusals += s.modeRefusals
			changes += s.changes
		}
	}
	b.ReportMetric(100*float64(placed)/float64(arrived), "placed-%")
	b.ReportMetric(100*float64(served)/float64(offered), "served-%")
	b.ReportMetric(float64(modeRefusals)/churnSeeds, "mode-refusals")
	b.ReportMetric(float64(changes)/float64(placed), "mode-changes/claim")
}

type modeChurnStats struct{ placed, arrived, served, offered, modeRefusals, changes int }

func runModeChurn(b *testing.B, seed int64) modeChurnStats {
	ctx := context.Background()
	rng := rand.New(rand.NewSource(seed))
	total := 0
	for _, m := range modeChurnMix {
		total += m.weight
	}
	n := newModeNodeTB(b, fleetTemplate)
	type live struct {
		devs []string
		left int
	}
	var running []live
	var s modeChurnStats
	free := 64
	for ev := range modeChurnEvents {
		kept := running[:0]
		for _, l := range running {
			if l.left == ev {
				for _, d := range l.devs {
					delete(n.held, d)
				}
				continue
			}
			kept = append(kept, l)
		}
		running = kept
		s.changes += n.settle()
		r := rng.Intn(total)
		mix := modeChurnMix[len(modeChurnMix)-1]
		for _, m := range modeChurnMix {
			if r < m.weight {
				mix = m
				break
			}
			r -= m.weight
		}
		life := 1 + int(rng.ExpFloat64()*16)
		s.arrived++
		s.offered += mix.xcds * life
		claim := amdWholeClaim("x")
		if mix.kind != wholeKind {
			claim = amdClaim("x", mix.kind)
		}
		c := n.cluster(publish.Options{Partitioning: publish.Dynamic, Window: 2})
		got, err := c.Allocate(ctx, fleetTemplate, claim)
		if err != nil {
			b.Fatal(err)
		}
		if got == nil {
			free = 64 - n.heldXCDs()
			if free >= mix.xcds {
				s.modeRefusals++
			}
			continue
		}
		s.placed++
		s.served += mix.xcds * life
		devs := alloctest.Devices(got[0])
		for _, d := range devs {
			n.held[d] = true
		}
		n.checkNoDoubleBooking(fmt.Sprintf("seed %d event %d", seed, ev))
		running = append(running, live{devs: devs, left: ev + life})
		s.changes += n.settle()
	}
	return s
}

// heldXCDs is how many XCDs the allocated devices take.
func (n *modeNode) heldXCDs() int {
	x := 0
	for d := range n.held {
		e := n.every.Devices[d]
		if e.Carve == nil {
			x += e.GPU.Partitioning.ComputeSlices
		} else {
			x += e.Carve.Placement.Size
		}
	}
	return x
}

// newModeNodeTB is newModeNode for benchmarks, on node name.
func newModeNodeTB(tb testing.TB, name string) *modeNode {
	m, err := sim.Profile("mi300x-8", name)
	if err != nil {
		tb.Fatal(err)
	}
	m.ModeChangeTime = nil
	n := &modeNode{t: tb, node: name, hw: alloctest.NewSim(tb, m), held: map[string]bool{}}
	n.discover()
	if n.every, err = publish.Build(name, n.inv, dynamic); err != nil {
		tb.Fatal(err)
	}
	return n
}
