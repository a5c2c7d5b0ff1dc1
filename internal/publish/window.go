package publish

import (
	"maps"
	"sort"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/names"
)

// The placement window (package doc, rule 8). A dynamic H100 publishes 25
// placements next to its whole GPU, and the scheduler converts every
// device of a node on every Filter and evaluates CEL on every device it
// scans, so an 8-GPU node costs it 208 devices. First fit fills placements
// from one end of the node, one GPU at a time, so most untouched GPUs'
// placements only lengthen the scan. With a window of K, a dynamic GPU
// publishes its placements when it has partitions, and otherwise only while
// it is one of the K untouched GPUs that are open; its whole GPU is always
// published.
//
// What may not happen is unpublishing a placement a claim is allocated:
// the allocator counts a counter set's use only from allocated devices it
// finds in the slices, so the same memory slices could be handed out twice.
// The agent learns of an allocation only at prepare, so it never closes an
// open GPU on a guess:
//
//   - an open GPU stays open (sticky) while it has no partitions and no
//     claim holds it whole, even beyond K, and across restarts (the agent
//     reads which GPUs its last slices opened);
//   - it closes only while a prepared claim holds the whole GPU: that claim
//     takes every counter, so no placement of the GPU can be allocated then,
//     and none can have been before (the allocator would have refused the
//     whole GPU);
//   - a GPU with partitions is always open: a partition's own placement
//     stays allocated to its claim until the claim is deallocated, which the
//     agent does not see (on a GPU of modes, partitions a claim holds:
//     touched).
//
// Opening is always safe; it happens when fewer than K untouched GPUs are
// open, in fill order (the last GPU of rule 2 first), so the window is where
// first fit would put the next partition anyway.
//
// Every dynamic GPU keeps its counter set and a slice for its placements,
// empty while it is closed, so opening or closing a GPU updates that one
// slice. The agent opens GPUs in a build of their own (Options.DeferOpen):
// a carve that also opened a GPU would change two slices at once, and the
// resourceslice controller answers a change of more than one slice by
// writing every slice of the pool again under a new generation.

// WindowGPU is what the window knows of one dynamic GPU.
type WindowGPU struct {
	// Name is the GPU's device name (gpu-<n>), UUID its UUID; Rank its
	// place in rule 2.
	Name, UUID string
	Rank       int
	// Touched: partitions exist on it (on a GPU of modes, held ones:
	// touched). HeldWhole: a claim holds the whole
	// GPU. WasOpen: its placements were published before. Pinned: it has
	// no whole GPU device (MIG mode on for good), so its placements are all
	// it can offer.
	Touched, HeldWhole, WasOpen, Pinned bool
}

// OpenGPUs returns the names of gpus whose placements are published with a
// window of k (k <= 0: every GPU's).
func OpenGPUs(gpus []WindowGPU, k int) map[string]bool { return openGPUs(gpus, k, true) }

// openGPUs is OpenGPUs; without mayOpen no closed GPU opens.
func openGPUs(gpus []WindowGPU, k int, mayOpen bool) map[string]bool {
	open := make(map[string]bool, len(gpus))
	var closed []WindowGPU
	untouchedOpen := 0
	for _, g := range gpus {
		switch {
		case k <= 0 || g.Pinned || g.Touched:
			open[g.Name] = true
		case g.HeldWhole:
			// Closed: the claim holding it takes every counter.
		case g.WasOpen:
			open[g.Name] = true
		default:
			closed = append(closed, g)
			continue
		}
		if open[g.Name] && !g.Touched {
			untouchedOpen++
		}
	}
	sort.Slice(closed, func(a, b int) bool { return closed[a].Rank > closed[b].Rank })
	for _, g := range closed {
		if untouchedOpen >= k || !mayOpen {
			break
		}
		open[g.Name] = true
		untouchedOpen++
	}
	return open
}

// window returns what the window knows of each dynamic GPU of n, the GPUs
// whose placements this build publishes, by device name, and whether
// Options.DeferOpen kept it from opening some.
func window(n *inventory.Node, order []int, rank map[int]int, opts Options) ([]WindowGPU, map[string]bool, bool) {
	var gpus []WindowGPU
	for pos, gi := range order {
		g := &n.GPUs[gi]
		if dyn, _ := dynamicGPU(g, opts.Partitioning); !dyn {
			continue
		}
		name := names.GPU(pos)
		gpus = append(gpus, WindowGPU{
			Name:      name,
			UUID:      g.UUID,
			Rank:      rank[gi],
			Touched:   touched(g, opts.Held),
			HeldWhole: opts.HeldWhole != nil && opts.HeldWhole(g.UUID),
			WasOpen:   opts.Open == nil || opts.Open(name),
			Pinned:    !wholeOffered(g),
		})
	}
	open := OpenGPUs(gpus, opts.Window)
	if !opts.DeferOpen {
		return gpus, open, false
	}
	kept := openGPUs(gpus, opts.Window, false)
	return gpus, kept, !maps.Equal(kept, open)
}

// touched reports whether g has partitions that keep it open. On a GPU of
// modes only held ones do: a partition nobody holds is the mode the GPU
// rests in or was left in (by an operator, or a rest the agent could not
// set), which prepare changes at will (modeFree publishes every mode's
// placements there), so such a GPU is idle, in the window or closed like
// any other; counted touched it would stay open for good beside the K.
// Closing it is safe by the rules above: it closes only while held whole,
// and an open one stays open. held nil (before the checkpoint is read)
// counts every partition as held. A MIG partition is a carve's, held or
// about to be swept: it keeps its GPU open.
func touched(g *inventory.GPU, held func(string, *inventory.Partition) bool) bool {
	if !modal(g) || held == nil {
		return len(g.Partitions) > 0
	}
	for i := range g.Partitions {
		if held(g.UUID, &g.Partitions[i]) {
			return true
		}
	}
	return false
}

// WindowMoved reports whether the window would open other GPUs than res
// did, were the GPUs held whole those heldWhole reports: a claim now holds
// an open GPU whole, a GPU was released while the window was short, or res
// deferred an opening. A window of k <= 0 never moves.
func WindowMoved(res *Result, k int, heldWhole func(gpu string) bool) bool {
	if k <= 0 || res == nil {
		return false
	}
	gpus := make([]WindowGPU, len(res.Window))
	for i, g := range res.Window {
		g.WasOpen, g.HeldWhole = res.Open[g.Name], heldWhole(g.UUID)
		gpus[i] = g
	}
	open := OpenGPUs(gpus, k)
	return !maps.Equal(open, res.Open)
}

// WindowCloses reports whether a claim now holds whole (heldWhole) a GPU
// without partitions that res publishes placements of: the agent
// republishes at once, since that GPU's placements can no longer be
// allocated.
func WindowCloses(res *Result, heldWhole func(gpu string) bool) bool {
	if res == nil {
		return false
	}
	for _, g := range res.Window {
		if res.Open[g.Name] && !g.Touched && !g.Pinned && heldWhole(g.UUID) {
			return true
		}
	}
	return false
}
