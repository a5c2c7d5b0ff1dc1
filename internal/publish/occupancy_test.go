package publish_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// TestOccupancyOrder: each dynamic GPU's placements are a slice of their
// own, so carving on one GPU changes that slice only (the resourceslice
// controller then updates one object and keeps the pool's generation);
// in it, placements the partitions that exist block come last, every free
// placement of the smallest profile first, then the first free placement
// of every other profile before the others; the real
// allocator still chooses, for a claim of one profile, the device it
// chooses in the order without occupancy.
func TestOccupancyOrder(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	hw := migBackend(t, ctx, "dgx-h100")
	inv, err := hw.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	empty, err := publish.Build("dgx-h100", inv, dynamic)
	if err != nil {
		t.Fatal(err)
	}
	gpu7 := empty.Devices["gpu-7"].GPU.UUID
	var carved []string
	for _, c := range []struct {
		profile string
		start   int
	}{{"3g.40gb", 4}, {"1g.10gb+me", 0}} {
		pr := empty.Devices["gpu-7"].GPU.Partitioning.Profile(c.profile)
		p, err := hw.CreatePartition(ctx, gpu7, c.profile, inventory.Placement{Start: c.start, Size: pr.Placements[0].Size})
		if err != nil {
			t.Fatal(err)
		}
		carved = append(carved, publish.PartitionName("gpu-7", *p))
	}
	if inv, err = hw.Discover(ctx); err != nil {
		t.Fatal(err)
	}
	occ, err := publish.Build("dgx-h100", inv, dynamic)
	if err != nil {
		t.Fatal(err)
	}

	// One slice per GPU's placements, one slice changed by the carving.
	emptyPool, occPool := empty.Resources.Pools["dgx-h100"], occ.Resources.Pools["dgx-h100"]
	if len(emptyPool.Slices) != len(occPool.Slices) {
		t.Fatalf("%d slices after carving, %d before", len(occPool.Slices), len(emptyPool.Slices))
	}
	changed := 0
	for i, s := range occPool.Slices {
		parents := map[string]bool{}
		for _, d := range s.Devices {
			e := occ.Devices[d.Name]
			if e.Carve != nil {
				parents[e.GPU.UUID] = true
			}
		}
		if len(parents) > 1 {
			t.Errorf("slice %d holds placements of %d GPUs", i, len(parents))
		}
		if !apiequality.Semantic.DeepEqual(s, emptyPool.Slices[i]) {
			changed++
		}
	}
	if changed != 1 {
		t.Errorf("carving on one GPU changed %d slices, want 1", changed)
	}

	// Blocked last, first free of each profile first, free ones in the
	// order without occupancy.
	avail := map[int]bool{}
	for _, n := range carved {
		pl := occ.Devices[n].Carve.Placement
		for k := pl.Start; k < pl.Start+pl.Size; k++ {
			avail[k] = true // taken
		}
	}
	blocked := func(name string) bool {
		e := empty.Devices[name] // the same placement, published or not
		if slices.Contains(carved, name) {
			return true
		}
		for k := e.Carve.Placement.Start; k < e.Carve.Placement.Start+e.Carve.Placement.Size; k++ {
			if avail[k] {
				return true
			}
		}
		return e.Carve.Profile == "1g.10gb+me" // the one OFA is taken
	}
	placementsOf := func(r *publish.Result, pool resourceslice.Pool) []string {
		var out []string
		for _, s := range pool.Slices {
			for _, d := range s.Devices {
				if e := r.Devices[d.Name]; e.Carve != nil && e.GPU.UUID == gpu7 {
					out = append(out, d.Name)
				}
			}
		}
		return out
	}
	slice7, empty7 := placementsOf(occ, occPool), placementsOf(empty, emptyPool)
	if len(empty7) != 25 {
		t.Fatalf("gpu-7's slice has %d placements empty, want 25", len(empty7))
	}
	// Placements the partitions leave no room for are left out; the
	// partitions themselves and every free placement stay.
	for _, n := range empty7 {
		kept := slices.Contains(slice7, n)
		gone := blocked(n) && !slices.Contains(carved, n)
		if gone == kept {
			t.Errorf("%s: published %v after carving, want %v", n, kept, !gone)
		}
		// The agent still knows it, for a claim allocated it before.
		if _, known := occ.LeftOut[n]; known != gone {
			t.Errorf("%s: in LeftOut %v, want %v", n, known, gone)
		}
	}
	// Tiers in order: every free placement of the smallest profile, the
	// first free one of each other profile, the other free ones, blocked.
	tiers := []string{"", "free of the smallest profile", "first free of its profile", "free", "blocked"}
	smallest := empty.Devices[empty7[0]].Carve.Profile
	last, firstDone := 0, map[string]bool{}
	for _, n := range slice7 {
		p, tier := occ.Devices[n].Carve.Profile, 0
		switch {
		case blocked(n):
			tier = 4
		case p == smallest:
			tier = 1
		case !firstDone[p]:
			tier, firstDone[p] = 2, true
		default:
			tier = 3
		}
		if tier < last {
			t.Errorf("%s (%s) follows a placement %s: %v", n, tiers[tier], tiers[last], slice7)
		}
		last = tier
	}
	pos := func(order []string) map[string]int {
		m := map[string]int{}
		for i, n := range order {
			m[n] = i
		}
		return m
	}
	before, after := pos(empty.Order), pos(occ.Order)
	for _, a := range occ.Order {
		for _, b := range occ.Order {
			ea, eb := occ.Devices[a], occ.Devices[b]
			if ea.Carve == nil || eb.Carve == nil || ea.Carve.Profile != eb.Carve.Profile || blocked(a) || blocked(b) {
				continue
			}
			if (before[a] < before[b]) != (after[a] < after[b]) {
				t.Errorf("free %s placements %s and %s swapped by occupancy", ea.Carve.Profile, a, b)
			}
		}
	}

	// The real allocator: the same device for a claim of each profile, the
	// carved partitions held by claims.
	classes, err := alloctest.Classes()
	if err != nil {
		t.Fatal(err)
	}
	cluster := func(r *publish.Result) *alloctest.Cluster {
		c := alloctest.NewCluster(publish.Objects(names.DriverName, "dgx-h100", r.Resources), classes)
		for _, n := range carved {
			c.MarkAllocated("dgx-h100", n)
		}
		return c
	}
	cb, co := cluster(empty), cluster(occ)
	for _, kind := range []string{"gpu", "1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "1g.10gb", "3g.40gb", "2g.20gb"} {
		claim := func() *resourceapi.ResourceClaim {
			if kind == "gpu" {
				return wholeClaim(fmt.Sprint("c-", kind))
			}
			return migClaim(fmt.Sprint("c-", kind), kind)
		}
		want, err := cb.Allocate(ctx, "dgx-h100", claim())
		if err != nil {
			t.Fatal(err)
		}
		got, err := co.Allocate(ctx, "dgx-h100", claim())
		if err != nil {
			t.Fatal(err)
		}
		if (want == nil) != (got == nil) || (want != nil && alloctest.Devices(want[0])[0] != alloctest.Devices(got[0])[0]) {
			t.Errorf("%s: %v with occupancy order, %v without", kind, got, want)
		}
	}
}

// TestSmallestProfileBetweenRepublishes: the scheduler allocates many
// claims of a GPU's smallest profile from one publication, before the
// agent carves and republishes (a burst of pods). Each of them scans, past
// what is allocated, only the whole GPU ahead of its slice and its own
// placement: no first placement of another profile (rule 7). Before, the
// second 1g.10gb claim on a GPU scanned the six other profiles' first
// placements, two CEL evaluations each.
func TestSmallestProfileBetweenRepublishes(t *testing.T) {
	for _, c := range []struct {
		machine, class, profile string
		fits                    int // placements of the profile in the window
	}{
		{"dgx-h100", "mig.gpu.tessera.dev", "1g.10gb", 14},
		{"mi300x-8", "xcp.gpu.tessera.dev", "CPX", 16},
	} {
		t.Run(c.machine, func(t *testing.T) {
			ctx := context.Background()
			objs, _ := alloctest.PublishSimWith(t, c.machine, "node", publish.Options{Partitioning: publish.Dynamic, Window: 2, Open: func(string) bool { return false }})
			classes, err := alloctest.Classes()
			if err != nil {
				t.Fatal(err)
			}
			cl := alloctest.NewCluster(objs, classes)
			order := scanOrder(objs)
			n := 0
			for ; ; n++ {
				claim := alloctest.Claim(fmt.Sprint("c-", n), req(c.class, 1, fmt.Sprintf(profileIs, c.profile)))
				res, err := cl.Allocate(ctx, "node", claim)
				if err != nil {
					t.Fatal(err)
				}
				if res == nil {
					break
				}
				got, scanned := alloctest.Devices(res[0])[0], 0
				for _, d := range order {
					if d == got {
						break
					}
					if !cl.Allocated.Has(structured.MakeDeviceID(names.DriverName, "node", d)) {
						scanned++ // devices before it, free when the claim came
					}
				}
				// On the first GPU of the window, past the allocated ones,
				// only the whole GPU ahead of the slice. (On the second, the
				// first GPU's other placements too, until a republish
				// leaves them out.)
				if n < c.fits/2 && scanned > 1 {
					t.Errorf("claim %d (%s) scanned %d free devices before %s, want 1 (the whole GPU)", n, c.profile, scanned, got)
				}
			}
			if n != c.fits {
				t.Errorf("%d %s claims fit the window, want %d", n, c.profile, c.fits)
			}
		})
	}
}
