package publish_test

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// churnOrders are device orders to compare with Tessera's, as sort keys
// over a device (the published position breaks ties). Only the order among
// one profile's devices, and among whole GPUs, matters to one-device
// claims of one profile.
var churnOrders = map[string]func(d churnDevice) []int{
	// Tessera's own order, and name order (naive), through first fit.
	"published": func(d churnDevice) []int { return nil },
	"name":      func(d churnDevice) []int { return []int{d.gpu, d.start} },
	// Tessera's placement order within a GPU, parents ascending like whole GPUs.
	"parents-asc": func(d churnDevice) []int { return []int{d.gpu} },
	// Parents descending, within a GPU by start only.
	"start-asc": func(d churnDevice) []int { return []int{d.partGPU(), d.start} },
	// Highest start first without the stranding rule: 1g.10gb at 6 first
	// (what "blocks the fewest larger placements" alone gives on an H100).
	"start-desc": func(d churnDevice) []int { return []int{d.partGPU(), -d.start} },
	// Tessera's order, but 1g.10gb(+me) fills slices 0, 1, ... 6: slice 6
	// last, since a 1g.10gb there strands slice 7 (only 1g.20gb at 6,
	// 3g.40gb at 4 and 7g.80gb reach it), and 4-7 stay free for 3g.40gb.
	"1g-low": func(d churnDevice) []int {
		if d.profile == "1g.10gb" || d.profile == "1g.10gb+me" {
			return []int{d.partGPU(), d.start}
		}
		return []int{d.partGPU()}
	},
}

// churnDevice is a published device as churnFirstFit sees it.
type churnDevice struct {
	name, profile string // profile is wholeKind for a whole GPU
	gpu, start    int    // start is -1 for a whole GPU
	mask          uint32 // the counters it consumes, one bit each
}

// partGPU is the GPU sort key of Tessera's rule 4: whole GPUs ascending,
// partitions descending.
func (d churnDevice) partGPU() int {
	if d.profile == wholeKind {
		return d.gpu
	}
	return -d.gpu
}

// churnFirstFit is the allocator's first fit for one-device claims on one
// node, without the allocator: the first device in slice order whose
// profile matches, not allocated, whose counters (all of capacity 1 on an
// H100: memory slices and the OFA) are free.
type churnFirstFit struct {
	devs  []churnDevice
	used  map[int]uint32 // per GPU
	taken []bool
	// key, when set, reorders the free devices by the current state before
	// every claim (policyAdaptive): first fit over an order that follows
	// occupancy.
	key adaptiveKey
	// window, when above 0, publishes placements of the GPUs open under a
	// window of that many (policyWindow); open is by GPU number.
	window int
	open   map[int]bool
	rank   map[int]int
}

func newChurnFirstFit(tb testing.TB, objs []*resourceapi.ResourceSlice) *churnFirstFit {
	tb.Helper()
	sorted := slices.Clone(objs)
	slices.SortFunc(sorted, func(a, b *resourceapi.ResourceSlice) int { return strings.Compare(a.Name, b.Name) })
	f := &churnFirstFit{used: map[int]uint32{}}
	for _, s := range sorted {
		for _, cs := range s.Spec.SharedCounters {
			for name, c := range cs.Counters {
				if c.Value.Value() != 1 {
					tb.Fatalf("counter %s/%s has capacity %v; first fit models capacity 1 only", cs.Name, name, c.Value.String())
				}
			}
		}
		for _, d := range s.Spec.Devices {
			f.devs = append(f.devs, parseChurnDevice(tb, d))
		}
	}
	f.taken = make([]bool, len(f.devs))
	return f
}

func parseChurnDevice(tb testing.TB, d resourceapi.Device) churnDevice {
	tb.Helper()
	cd := churnDevice{name: d.Name, profile: wholeKind, start: -1}
	if a, ok := d.Attributes["profile"]; ok && a.StringValue != nil {
		cd.profile = *a.StringValue
		i := strings.LastIndexByte(d.Name, '-')
		start, err := strconv.Atoi(d.Name[i+1:])
		if err != nil {
			tb.Fatalf("device %s: no start", d.Name)
		}
		cd.start = start
	}
	if len(d.ConsumesCounters) != 1 {
		tb.Fatalf("device %s consumes %d counter sets", d.Name, len(d.ConsumesCounters))
	}
	cc := d.ConsumesCounters[0]
	gpu, err := strconv.Atoi(strings.TrimPrefix(cc.CounterSet, "gpu-"))
	if err != nil {
		tb.Fatalf("device %s: counter set %s", d.Name, cc.CounterSet)
	}
	cd.gpu = gpu
	for name, c := range cc.Counters {
		bit := 8 // the only counter beyond memory slices on an H100
		if rest, ok := strings.CutPrefix(name, "memory-slice-"); ok {
			bit, _ = strconv.Atoi(rest)
		} else if name != "ofa" {
			tb.Fatalf("device %s consumes unknown counter %s", d.Name, name)
		}
		if c.Value.Value() != 1 {
			tb.Fatalf("device %s consumes %v of %s", d.Name, c.Value.String(), name)
		}
		cd.mask |= 1 << bit
	}
	return cd
}

// allocate takes the first fitting device for a claim of profile and
// returns its index, or -1.
func (f *churnFirstFit) allocate(profile string) int {
	best := f.first(profile, f.window > 0)
	if best >= 0 {
		f.taken[best] = true
		f.used[f.devs[best].gpu] |= f.devs[best].mask
		f.reopen()
	}
	return best
}

// first returns the device first fit takes for profile, only among the
// published ones if windowed, or -1.
func (f *churnFirstFit) first(profile string, windowed bool) int {
	best, bestKey := -1, []int(nil)
	for i, d := range f.devs {
		if d.profile != profile || !f.free(i) || (windowed && d.profile != wholeKind && !f.open[d.gpu]) {
			continue
		}
		if f.key == nil {
			best = i
			break
		}
		if k := append(f.key(f, i), i); best < 0 || slices.Compare(k, bestKey) < 0 {
			best, bestKey = i, k
		}
	}
	return best
}

func (f *churnFirstFit) release(i int) {
	if i < 0 {
		return
	}
	f.taken[i] = false
	f.used[f.devs[i].gpu] &^= f.devs[i].mask
	f.reopen()
}

// reopen recomputes the window after a change, as the agent republishes
// after a carve, a destroy or a whole GPU's prepare and release: a GPU is
// touched while a placement of it is taken, held whole while it is.
func (f *churnFirstFit) reopen() {
	if f.window <= 0 {
		return
	}
	states := map[int]*publish.WindowGPU{}
	for _, d := range f.devs {
		if states[d.gpu] == nil {
			states[d.gpu] = &publish.WindowGPU{Name: strconv.Itoa(d.gpu), Rank: f.rank[d.gpu], WasOpen: f.open[d.gpu]}
		}
	}
	for i, d := range f.devs {
		if !f.taken[i] {
			continue
		}
		if d.profile == wholeKind {
			states[d.gpu].HeldWhole = true
		} else {
			states[d.gpu].Touched = true
		}
	}
	var gpus []publish.WindowGPU
	for _, s := range states {
		gpus = append(gpus, *s)
	}
	open := publish.OpenGPUs(gpus, f.window)
	f.open = map[int]bool{}
	for name := range open {
		g, _ := strconv.Atoi(name)
		f.open[g] = true
	}
}

// windowed makes f publish placements through a window of k, starting
// from a fresh node: the GPUs' ranks are the reverse of the order their
// placements come in (rule 4).
func (f *churnFirstFit) windowed(k int) {
	f.window, f.rank, f.open = k, map[int]int{}, map[int]bool{}
	n := 0
	for _, d := range f.devs {
		if _, seen := f.rank[d.gpu]; !seen && d.profile != wholeKind {
			f.rank[d.gpu] = -n
			n++
		}
	}
	f.reopen()
}

var (
	churnObjsMu sync.Mutex
	churnObjs   = map[string][]*resourceapi.ResourceSlice{}
)

// churnSlices returns one dgx-h100's slices as policy orders them, built
// once and shared read-only: tessera as published, naive in name order,
// order=<key> by churnOrders[key].
func churnSlices(tb testing.TB, policy string) []*resourceapi.ResourceSlice {
	tb.Helper()
	churnObjsMu.Lock()
	defer churnObjsMu.Unlock()
	if objs, ok := churnObjs[policy]; ok {
		return objs
	}
	classes, err := alloctest.Classes()
	if err != nil {
		tb.Fatal(err)
	}
	objs, _ := alloctest.PublishSimWith(tb, churnNode, churnNode, dynamic)
	switch policy {
	case policyTessera:
	case policyNaive:
		objs = reorderDevices(objs, func(a, b resourceapi.Device) int { return strings.Compare(a.Name, b.Name) })
	default:
		key, ok := churnOrders[strings.TrimPrefix(policy, policyOrder)]
		if !ok {
			tb.Fatalf("unknown policy %q", policy)
		}
		pos := map[string]int{}
		for _, s := range objs {
			for _, d := range s.Spec.Devices {
				pos[d.Name] = len(pos)
			}
		}
		objs = reorderDevices(objs, func(a, b resourceapi.Device) int {
			ka := append(key(parseChurnDevice(tb, a)), pos[a.Name])
			kb := append(key(parseChurnDevice(tb, b)), pos[b.Name])
			return slices.Compare(ka, kb)
		})
	}
	alloctest.NewCluster(objs, classes) // names the slices once, before they are shared
	churnObjs[policy] = objs
	return objs
}

// churnCluster is a cluster of objs with nothing allocated.
func churnCluster(tb testing.TB, objs []*resourceapi.ResourceSlice) *alloctest.Cluster {
	tb.Helper()
	classes, err := alloctest.Classes()
	if err != nil {
		tb.Fatal(err)
	}
	return alloctest.NewCluster(objs, classes)
}

// reorderDevices returns a node's slices with its devices re-sorted by cmp
// across the pool and re-cut into slices of at most MaxDevicesPerSlice,
// keeping the slice names (so slice order) and the counter slices.
func reorderDevices(objs []*resourceapi.ResourceSlice, cmp func(a, b resourceapi.Device) int) []*resourceapi.ResourceSlice {
	var devices []resourceapi.Device
	var deviceSlices, counterSlices []*resourceapi.ResourceSlice
	for _, s := range objs {
		if len(s.Spec.SharedCounters) > 0 {
			counterSlices = append(counterSlices, s.DeepCopy())
			continue
		}
		deviceSlices = append(deviceSlices, s)
		for _, d := range s.Spec.Devices {
			devices = append(devices, *d.DeepCopy())
		}
	}
	if len(devices) > len(deviceSlices)*publish.MaxDevicesPerSlice {
		panic("reorderDevices: more devices than the slices hold")
	}
	slices.SortStableFunc(devices, cmp)
	var out []*resourceapi.ResourceSlice
	for i, s := range deviceSlices {
		c := s.DeepCopy()
		lo, hi := min(i*publish.MaxDevicesPerSlice, len(devices)), min((i+1)*publish.MaxDevicesPerSlice, len(devices))
		c.Spec.Devices = devices[lo:hi]
		out = append(out, c)
	}
	return append(out, counterSlices...)
}
