package publish_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// TestRepublishNeverDoubleBooks: random churn on a dynamic DGX H100 with
// the real allocator, without and with a window of 2. Claims of every
// profile and whole GPUs are allocated; some are prepared (carved, or held
// whole) at once, others stay allocated and unprepared (a prepare not yet
// come) across republishes; claims are released. After every carve,
// destroy, whole-GPU prepare or release the node republishes (placements
// the partitions block are left out; the window closes GPUs held whole and
// opens others, from what the build before opened) and the scheduler sees
// the new slices with what it allocated. Every allocated device stays
// published, the hardware accepts every carve the allocator chose, and no
// two allocations share a memory slice.
func TestRepublishNeverDoubleBooks(t *testing.T) {
	for _, window := range []int{0, 2} {
		t.Run(fmt.Sprint("window=", window), func(t *testing.T) { republishChurn(t, window) })
	}
}

func republishChurn(t *testing.T, window int) {
	closes := 0 // GPUs the window closed, over every seed
	_, ctx := ktesting.NewTestContext(t)
	classes, err := alloctest.Classes()
	if err != nil {
		t.Fatal(err)
	}
	kinds := []string{"gpu", "1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}
	for seed := range uint64(12) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 29))
			hw := migBackend(t, ctx, "dgx-h100")
			var res *publish.Result
			var c *alloctest.Cluster
			type held struct {
				claim    string
				device   string
				carved   string // partition UUID once carved
				prepared bool   // a whole GPU the agent holds
				alloc    resourceapi.AllocationResult
			}
			var live []*held
			republish := func() {
				t.Helper()
				inv, err := hw.Discover(ctx)
				if err != nil {
					t.Fatal(err)
				}
				o := dynamic
				o.Window = window
				if res != nil {
					o.Open = func(g string) bool { return res.Open[g] }
				} else {
					o.Open = func(string) bool { return false }
				}
				o.HeldWhole = func(uuid string) bool {
					for _, h := range live {
						if h.prepared && res.Devices[h.device].GPU.UUID == uuid {
							return true
						}
					}
					return false
				}
				prev := res
				if res, err = publish.Build("dgx-h100", inv, o); err != nil {
					t.Fatal(err)
				}
				if prev != nil {
					for g := range prev.Open {
						if !res.Open[g] {
							closes++
						}
					}
				}
				next := alloctest.NewCluster(publish.Objects(names.DriverName, "dgx-h100", res.Resources), classes)
				if c != nil {
					next.Allocated = c.Allocated
				}
				c = next
				for _, h := range live {
					if _, ok := res.Devices[h.device]; !ok {
						t.Fatalf("allocated device %s (claim %s) is not published after the republish", h.device, h.claim)
					}
				}
			}
			republish()
			allocs := 0
			// Allocations outnumber releases, so the node fills and whole
			// GPUs land on GPUs the window opened.
			for step := range 100 {
				switch op := rng.IntN(5); {
				case op <= 1 || len(live) == 0:
					kind := kinds[rng.IntN(len(kinds))]
					name := fmt.Sprintf("c%d", step)
					claim := tesseraClaim(name, kind)
					got, err := c.Allocate(ctx, "dgx-h100", claim)
					if err != nil {
						t.Fatal(err)
					}
					if got == nil {
						continue
					}
					allocs++
					live = append(live, &held{claim: name, device: alloctest.Devices(got[0])[0], alloc: got[0]})
				case op <= 3:
					// The agent prepares one allocated, uncarved placement
					// or whole GPU.
					var pending []*held
					for _, h := range live {
						e := res.Devices[h.device]
						if (h.carved == "" && e.Carve != nil && e.Partition == nil) || (e.Carve == nil && !h.prepared) {
							pending = append(pending, h)
						}
					}
					if len(pending) == 0 {
						continue
					}
					h := pending[rng.IntN(len(pending))]
					e := res.Devices[h.device]
					if e.Carve == nil {
						h.prepared = true
						republish()
						continue
					}
					p, err := hw.CreatePartition(ctx, e.GPU.UUID, e.Carve.Profile, e.Carve.Placement)
					if err != nil {
						t.Fatalf("step %d: the hardware refuses %s, which the allocator gave claim %s: %v", step, h.device, h.claim, err)
					}
					h.carved = p.UUID
					republish()
				default:
					i := rng.IntN(len(live))
					h := live[i]
					live = slices.Delete(live, i, i+1)
					c.Release(h.alloc)
					if h.carved != "" {
						if err := hw.DestroyPartition(ctx, res.Devices[h.device].GPU.UUID, h.carved); err != nil {
							t.Fatal(err)
						}
						republish()
					}
					if h.prepared {
						republish()
					}
				}
				// No memory slice of a GPU is in two allocations.
				used := map[string]map[int]string{}
				for _, h := range live {
					e := res.Devices[h.device]
					if used[e.GPU.UUID] == nil {
						used[e.GPU.UUID] = map[int]string{}
					}
					start, size := 0, e.GPU.Partitioning.MemorySlices
					if e.Carve != nil {
						start, size = e.Carve.Placement.Start, e.Carve.Placement.Size
					}
					for s := start; s < start+size; s++ {
						if other, ok := used[e.GPU.UUID][s]; ok {
							t.Fatalf("step %d: memory slice %d of %s is in %s and %s", step, s, e.GPU.UUID, other, h.device)
						}
						used[e.GPU.UUID][s] = h.device
					}
				}
			}
			if allocs < 20 {
				t.Errorf("only %d allocations in 100 steps: the churn does not exercise the node", allocs)
			}
		})
	}
	if window > 0 && closes == 0 {
		t.Errorf("the window closed no GPU: the churn does not exercise closing")
	}
	t.Logf("window %d: %d GPUs closed", window, closes)
}
