package publish_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/sim"
)

// The packing oracle.
//
// A GPU's content is a count vector over kinds (the profiles of the H100
// table, then the whole GPU). gpuSets enumerates every set of placements
// one GPU can hold under NVIDIA's rules (no two overlap, MaxInstances per
// profile, compute slices, the GPU's engines such as its one OFA), which
// TestChurnOracleMatchesHardware checks exhaustively against the simulated
// backend; their count vectors plus {whole GPU} are the feasible vectors,
// closed under removal. fits decides whether a count vector splits into
// one feasible vector per GPU: a DFS that gives the next GPU the largest
// remaining kind and a vector maximal within what remains (any packing can
// be rearranged into that form, since removing partitions from a GPU keeps
// it feasible), memoised on (remaining vector, GPUs left).

const maxKinds = 8

type gpuVec [maxKinds]int8

type packer struct {
	gpus     int
	kinds    []string // profiles in table order, then wholeKind
	mem      []int    // memory slices per kind
	compute  []int    // compute slices per kind
	big      []int    // kinds, largest first
	vecs     []gpuVec // every feasible per-GPU vector but the empty one
	feasible map[gpuVec]bool
	slices   int // memory slices per GPU
	cslices  int // compute slices per GPU

	mu   sync.Mutex
	memo map[uint64]bool
}

var (
	packerOnce sync.Once
	packerH100 *packer
	packerErr  error
)

func h100Packer(tb testing.TB) *packer {
	tb.Helper()
	packerOnce.Do(func() {
		var m *sim.Machine
		m, packerErr = sim.Profile(churnNode, churnNode)
		if packerErr == nil {
			packerH100, packerErr = newPacker(&m.Node.GPUs[0], len(m.Node.GPUs))
		}
	})
	if packerErr != nil {
		tb.Fatal(packerErr)
	}
	return packerH100
}

func newPacker(g *inventory.GPU, gpus int) (*packer, error) {
	pt := g.Partitioning
	if len(pt.Profiles)+1 > maxKinds {
		return nil, fmt.Errorf("%d profiles", len(pt.Profiles))
	}
	p := &packer{gpus: gpus, feasible: map[gpuVec]bool{}, memo: map[uint64]bool{}, slices: pt.MemorySlices, cslices: pt.ComputeSlices}
	for _, pr := range pt.Profiles {
		p.kinds = append(p.kinds, pr.Name)
		p.mem = append(p.mem, pr.MemorySlices)
		p.compute = append(p.compute, pr.ComputeSlices)
	}
	p.kinds = append(p.kinds, wholeKind)
	p.mem = append(p.mem, pt.MemorySlices)
	p.compute = append(p.compute, pt.ComputeSlices)
	for k := range p.kinds {
		p.big = append(p.big, k)
	}
	slices.SortStableFunc(p.big, func(a, b int) int {
		if p.mem[a] != p.mem[b] {
			return p.mem[b] - p.mem[a]
		}
		return p.compute[b] - p.compute[a]
	})
	var whole gpuVec
	whole[len(p.kinds)-1] = 1
	p.feasible[whole] = true
	for _, set := range gpuSets(g) {
		var v gpuVec
		for _, r := range set {
			v[r.kind]++
		}
		p.feasible[v] = true
	}
	for v := range p.feasible {
		if v != (gpuVec{}) {
			p.vecs = append(p.vecs, v)
		}
	}
	slices.SortFunc(p.vecs, func(a, b gpuVec) int { return slices.Compare(a[:], b[:]) })
	return p, nil
}

func (p *packer) kind(name string) int {
	k := slices.Index(p.kinds, name)
	if k < 0 {
		panic("unknown kind " + name)
	}
	return k
}

func (p *packer) describe(v gpuVec) string {
	var parts []string
	for k, n := range v[:len(p.kinds)] {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%dx%s", n, p.kinds[k]))
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// fits reports whether the claims counted in rem pack onto gpus GPUs.
func (p *packer) fits(rem gpuVec, gpus int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fitsLocked(rem, gpus)
}

func (p *packer) fitsLocked(rem gpuVec, gpus int) bool {
	if rem == (gpuVec{}) {
		return true
	}
	if gpus == 0 {
		return false
	}
	mem, comp := 0, 0
	for k := range p.kinds {
		if rem[k] < 0 {
			panic("negative count")
		}
		mem += int(rem[k]) * p.mem[k]
		comp += int(rem[k]) * p.compute[k]
	}
	if mem > gpus*p.slices || comp > gpus*p.cslices {
		return false
	}
	key := uint64(gpus)
	for k := range p.kinds {
		key = key<<6 | uint64(rem[k])
	}
	if v, ok := p.memo[key]; ok {
		return v
	}
	first := -1
	for _, k := range p.big {
		if rem[k] > 0 {
			first = k
			break
		}
	}
	ok := false
	for _, v := range p.vecs {
		if v[first] == 0 || !p.maximalWithin(v, rem) {
			continue
		}
		next := rem
		for k := range p.kinds {
			next[k] -= v[k]
		}
		if p.fitsLocked(next, gpus-1) {
			ok = true
			break
		}
	}
	p.memo[key] = ok
	return ok
}

// maximalWithin reports whether v <= rem and no kind left in rem can join v.
func (p *packer) maximalWithin(v, rem gpuVec) bool {
	for k := range p.kinds {
		if v[k] > rem[k] {
			return false
		}
	}
	for k := range p.kinds {
		if v[k] < rem[k] {
			w := v
			w[k]++
			if p.feasible[w] {
				return false
			}
		}
	}
	return true
}

// placementRef is one profile at one placement of a GPU's table.
type placementRef struct {
	kind    int // index of the profile in the table
	profile string
	pl      inventory.Placement
}

func tablePlacements(pt *inventory.Partitioning) []placementRef {
	var out []placementRef
	for k, pr := range pt.Profiles {
		for _, pl := range pr.Placements {
			out = append(out, placementRef{kind: k, profile: pr.Name, pl: pl})
		}
	}
	return out
}

// canAdd applies NVIDIA's rules, as the oracle models them: may r be cut on
// a GPU of g's kind that holds set?
func canAdd(g *inventory.GPU, set []placementRef, r placementRef) bool {
	pt := g.Partitioning
	pr := &pt.Profiles[r.kind]
	same, compute := 1, pr.ComputeSlices
	engines := map[string]int64{}
	for e, n := range pr.Engines {
		engines[e] += n
	}
	for _, q := range set {
		if q.pl.Overlaps(r.pl) {
			return false
		}
		if q.kind == r.kind {
			same++
		}
		compute += pt.Profiles[q.kind].ComputeSlices
		for e, n := range pt.Profiles[q.kind].Engines {
			engines[e] += n
		}
	}
	if pr.MaxInstances > 0 && same > pr.MaxInstances {
		return false
	}
	if compute > pt.ComputeSlices {
		return false
	}
	for e, n := range engines {
		if limit, ok := g.Engines[e]; ok && n > limit {
			return false
		}
	}
	return true
}

// gpuSets enumerates every placement set canAdd allows on one GPU of g's
// kind, the empty set included, each once (placements in table order).
func gpuSets(g *inventory.GPU) [][]placementRef {
	refs := tablePlacements(g.Partitioning)
	var out [][]placementRef
	var walk func(set []placementRef, from int)
	walk = func(set []placementRef, from int) {
		out = append(out, slices.Clone(set))
		for j := from; j < len(refs); j++ {
			if canAdd(g, set, refs[j]) {
				walk(append(set, refs[j]), j+1)
			}
		}
	}
	walk(nil, 0)
	return out
}

// TestChurnOracleMatchesHardware walks every placement set the oracle
// allows on one H100, carving it on the simulated backend (NVIDIA's rules
// as the sim applies them), and at each set tries every placement after
// the set's last one in table order: the sim must accept exactly those
// canAdd allows. Every set is its last placement added to the set before
// it, and both rule sets only ever forbid more as partitions are added, so
// agreeing on these steps from the empty GPU means they allow the same
// sets. Then the oracle's packing is checked on NVIDIA's instance counts
// and on mixes whose fit depends on the arrangement.
func TestChurnOracleMatchesHardware(t *testing.T) {
	ctx := context.Background()
	hw := tmpfsMIGBackend(t, ctx, churnNode)
	inv, err := hw.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g := &inv.GPUs[0]
	refs := tablePlacements(g.Partitioning)
	sets, steps := 0, 0
	var walk func(set []placementRef, from int)
	walk = func(set []placementRef, from int) {
		sets++
		for j := from; j < len(refs); j++ {
			r := refs[j]
			want := canAdd(g, set, r)
			p, err := hw.CreatePartition(ctx, g.UUID, r.profile, r.pl)
			steps++
			if (err == nil) != want {
				t.Fatalf("on %v, %s at %d: oracle allows it: %v; sim: %v", set, r.profile, r.pl.Start, want, err)
			}
			if err != nil {
				continue
			}
			walk(append(set, r), j+1)
			if err := hw.DestroyPartition(ctx, g.UUID, p.UUID); err != nil {
				t.Fatal(err)
			}
		}
	}
	walk(nil, 0)
	if want := len(gpuSets(g)); sets != want {
		t.Errorf("walked %d placement sets on the sim, the oracle enumerates %d", sets, want)
	}
	pk := h100Packer(t)
	t.Logf("%d placement sets, %d carve attempts, %d distinct per-GPU count vectors", sets, steps, len(pk.vecs))

	// The instance counts of NVIDIA's table: one kind alone.
	for name, n := range h100Instances {
		var v gpuVec
		v[pk.kind(name)] = int8(n)
		if !pk.feasible[v] {
			t.Errorf("%d x %s not feasible on one GPU", n, name)
		}
		v[pk.kind(name)]++
		if pk.feasible[v] {
			t.Errorf("%d x %s feasible on one GPU", n+1, name)
		}
		v[pk.kind(name)] = int8(8 * n)
		if !pk.fits(v, 8) {
			t.Errorf("%d x %s do not pack on 8 GPUs", 8*n, name)
		}
		v[pk.kind(name)]++
		if pk.fits(v, 8) {
			t.Errorf("%d x %s pack on 8 GPUs", 8*n+1, name)
		}
	}
	// Mixes that need the right arrangement.
	for _, tc := range []struct {
		claims map[string]int
		gpus   int
		want   bool
	}{
		{map[string]int{"3g.40gb": 1, "4g.40gb": 1}, 1, true},
		{map[string]int{"3g.40gb": 2, "4g.40gb": 1}, 1, false},
		{map[string]int{"4g.40gb": 1, "2g.20gb": 1, "1g.20gb": 1}, 1, true},
		{map[string]int{"4g.40gb": 1, "1g.10gb": 4}, 1, false}, // 1g.10gb has no placement at 7
		{map[string]int{"4g.40gb": 1, "1g.10gb": 3}, 1, true},
		{map[string]int{"1g.10gb+me": 2}, 1, false}, // one OFA
		{map[string]int{"1g.10gb+me": 1, "1g.10gb": 6}, 1, true},
		{map[string]int{"whole": 1, "1g.10gb": 1}, 1, false},
		{map[string]int{"whole": 7, "3g.40gb": 2}, 8, true},
		{map[string]int{"whole": 7, "3g.40gb": 2, "1g.10gb": 1}, 8, false},
		{map[string]int{"4g.40gb": 8, "3g.40gb": 8}, 8, true},
		{map[string]int{"4g.40gb": 8, "3g.40gb": 8, "1g.10gb": 1}, 8, false},
		{map[string]int{"7g.80gb": 4, "whole": 4}, 8, true},
		{map[string]int{"2g.20gb": 24, "1g.20gb": 8}, 8, true},
		{map[string]int{"2g.20gb": 24, "1g.20gb": 9}, 8, false},
	} {
		var v gpuVec
		for name, n := range tc.claims {
			v[pk.kind(name)] = int8(n)
		}
		if got := pk.fits(v, tc.gpus); got != tc.want {
			t.Errorf("%v on %d GPUs: fits %v, want %v", tc.claims, tc.gpus, got, tc.want)
		}
	}
}

// TestChurnOracleAgreesWithBruteForce compares fits with a brute-force
// search over placements on random claim mixes for 2 GPUs.
func TestChurnOracleAgreesWithBruteForce(t *testing.T) {
	m, err := sim.Profile(churnNode, churnNode)
	if err != nil {
		t.Fatal(err)
	}
	g := &m.Node.GPUs[0]
	pk := h100Packer(t)
	refs := tablePlacements(g.Partitioning)
	whole := pk.kind(wholeKind)
	// brute places the claims of rem one by one, largest kind first, on
	// any GPU at any placement, remembering the GPU states (as placement
	// bitmasks, bit 31 for a whole GPU, sorted) that led nowhere.
	type state [2]uint32
	var brute func(rem gpuVec, gpus [2]uint32, dead map[state]bool) bool
	brute = func(rem gpuVec, gpus [2]uint32, dead map[state]bool) bool {
		k := -1
		for _, b := range pk.big {
			if rem[b] > 0 {
				k = b
				break
			}
		}
		if k < 0 {
			return true
		}
		key := state(gpus)
		if key[0] > key[1] {
			key[0], key[1] = key[1], key[0]
		}
		if dead[key] {
			return false
		}
		rem[k]--
		for i := range gpus {
			if gpus[i]&(1<<31) != 0 {
				continue
			}
			if k == whole {
				if gpus[i] == 0 {
					next := gpus
					next[i] = 1 << 31
					if brute(rem, next, dead) {
						return true
					}
				}
				continue
			}
			var set []placementRef
			for j, r := range refs {
				if gpus[i]&(1<<j) != 0 {
					set = append(set, r)
				}
			}
			for j, r := range refs {
				if r.kind != k || gpus[i]&(1<<j) != 0 || !canAdd(g, set, r) {
					continue
				}
				next := gpus
				next[i] |= 1 << j
				if brute(rem, next, dead) {
					return true
				}
			}
		}
		dead[key] = true
		return false
	}
	rng := rand.New(rand.NewSource(7))
	yes, no := 0, 0
	for i := 0; i < 300; i++ {
		var v gpuVec
		n := 1 + rng.Intn(9)
		for range n {
			v[rng.Intn(len(pk.kinds))]++
		}
		want := brute(v, [2]uint32{}, map[state]bool{})
		if got := pk.fits(v, 2); got != want {
			t.Fatalf("%s on 2 GPUs: fits %v, brute force %v", pk.describe(v), got, want)
		}
		if want {
			yes++
		} else {
			no++
		}
	}
	if yes < 50 || no < 50 {
		t.Errorf("%d fit, %d do not: the mixes do not exercise both", yes, no)
	}
}

// tmpfsMIGBackend is migBackend with its state on tmpfs where there is
// one: the sim syncs its state file on every carve, and the walk above
// carves some 20,000 times.
func tmpfsMIGBackend(t *testing.T, ctx context.Context, machine string) *sim.Backend {
	dir, err := os.MkdirTemp("/dev/shm", "tessera-churn-")
	if err != nil {
		return migBackend(t, ctx, machine)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	m, err := sim.Profile(machine, machine)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sim.New(m, dir, sim.WithBootID("boot"))
	if err != nil {
		t.Fatal(err)
	}
	inv, _ := b.Discover(ctx)
	for _, g := range inv.GPUs {
		if err := b.SetPartitionMode(ctx, g.UUID, true); err != nil {
			t.Fatal(err)
		}
	}
	return b
}
