package publish_test

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
)

// nobodyHolds publishes dynamically a node whose partitions no claim holds.
var nobodyHolds = publish.Options{Partitioning: publish.Dynamic, Held: func(string, *inventory.Partition) bool { return false }}

// tokenSets is, for one GPU's published devices, the counters each takes:
// the whole GPU's, and each partition's by mode.
type tokenSets struct {
	whole map[string]bool
	modes map[string][]map[string]bool
}

// publishedTokens reads, from what Build publishes for inv, the counters
// every device of every GPU of modes takes.
func publishedTokens(t *testing.T, inv *inventory.Node) map[string]*tokenSets {
	t.Helper()
	res, err := publish.Build("n", inv, nobodyHolds)
	if err != nil {
		t.Fatal(err)
	}
	devs := map[string]resourceapi.Device{}
	for _, pool := range res.Resources.Pools {
		for _, sl := range pool.Slices {
			for _, d := range sl.Devices {
				devs[d.Name] = d
			}
		}
	}
	out := map[string]*tokenSets{}
	for name, e := range res.Devices {
		if e.GPU == nil || !publish.IsModal(e.GPU) || !publish.IsDynamic(e.GPU, publish.Dynamic) {
			continue
		}
		ts := out[e.GPU.UUID]
		if ts == nil {
			ts = &tokenSets{modes: map[string][]map[string]bool{}}
			out[e.GPU.UUID] = ts
		}
		use := map[string]bool{}
		for _, cc := range devs[name].ConsumesCounters {
			for name := range cc.Counters {
				use[cc.CounterSet+"/"+name] = true
			}
		}
		if e.Carve == nil {
			ts.whole = use
			continue
		}
		ts.modes[e.Carve.Profile] = append(ts.modes[e.Carve.Profile], use)
	}
	return out
}

func meet(a, b map[string]bool) bool {
	for k := range a {
		if b[k] {
			return true
		}
	}
	return false
}

// checkTokens is the property the counters must have: a mode's partitions
// take disjoint sets that together are the whole GPU's, two partitions of
// different modes always share a counter, and the whole GPU shares one
// with every partition. Then the allocator can give out all of one mode's
// partitions, never two modes at once nor the whole GPU beside a partition.
func checkTokens(t *testing.T, gpu string, ts *tokenSets, wantModes int) {
	t.Helper()
	whole := ts.whole != nil
	if whole && len(ts.whole) == 0 {
		t.Errorf("GPU %s: whole GPU takes no counter", gpu)
	}
	if len(ts.modes) != wantModes {
		t.Errorf("GPU %s publishes partitions of %d modes, want %d", gpu, len(ts.modes), wantModes)
	}
	for mode, parts := range ts.modes {
		union := map[string]bool{}
		for i, a := range parts {
			if whole && !meet(a, ts.whole) {
				t.Errorf("GPU %s: %s partition %d shares no counter with the whole GPU", gpu, mode, i)
			}
			for j := i + 1; j < len(parts); j++ {
				if meet(a, parts[j]) {
					t.Errorf("GPU %s: %s partitions %d and %d share a counter", gpu, mode, i, j)
				}
			}
			for k := range a {
				union[k] = true
			}
			for other, ops := range ts.modes {
				if other <= mode {
					continue
				}
				for j, b := range ops {
					if !meet(a, b) {
						t.Errorf("GPU %s: %s partition %d and %s partition %d share no counter: both would be allocated", gpu, mode, i, other, j)
					}
				}
			}
		}
		if whole && len(union) != len(ts.whole) {
			t.Errorf("GPU %s: %s partitions take %d counters together, the whole GPU %d", gpu, mode, len(union), len(ts.whole))
		}
	}
}

// TestModeCountersEveryCatalogueGPU checks the property on the counters
// published for every GPU of modes of every catalogue machine, under every
// memory mode its machine file lists.
func TestModeCountersEveryCatalogueGPU(t *testing.T) {
	checked := 0
	for _, name := range sim.CatalogNames() {
		_, inv := alloctest.DiscoverSim(t, name, "n")
		got := publishedTokens(t, inv)
		for i := range inv.GPUs {
			g := &inv.GPUs[i]
			if !publish.IsModal(g) {
				continue
			}
			ts := got[g.UUID]
			if ts == nil {
				t.Errorf("%s: GPU %s of modes is not published dynamically", name, g.UUID)
				continue
			}
			// Every mode but the whole one is a set of partition devices.
			checkTokens(t, name+"/"+g.UUID, ts, len(g.Partitioning.Profiles)-1)
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no catalogue GPU has partition modes")
	}
}

// modalGPU is an idle AMD GPU of xcd XCDs that can be set to the modes of
// the given partition counts (the first the whole mode, 1).
func modalGPU(xcd int, modes map[string]int) inventory.GPU {
	pt := &inventory.Partitioning{Kind: inventory.PartitionXCP, MemorySlices: xcd, ComputeSlices: xcd, MemoryMode: "NPS1"}
	for name, n := range modes {
		pr := inventory.PartitionProfile{Name: name, MemorySlices: xcd / n, ComputeSlices: xcd / n, MaxInstances: n, MemoryBytes: 192 << 30 / int64(n), ComputeUnits: int64(304 / n)}
		for k := range n {
			pr.Placements = append(pr.Placements, inventory.Placement{Start: k * xcd / n, Size: xcd / n})
		}
		pt.Profiles = append(pt.Profiles, pr)
		if n == 1 {
			pt.Mode = name
		}
	}
	return inventory.GPU{UUID: "GPU-x", Vendor: inventory.VendorAMD, PCIBusID: "0000:0c:00.0", ProductName: "AMD Instinct", MemoryBytes: 192 << 30, ComputeUnits: 304,
		Health: inventory.Health{State: inventory.Healthy}, Partitioning: pt}
}

// TestModeCounters: the construction on the mode tables AMD's GPUs have
// (MI300X under NPS1 and NPS4, MI300A's six XCDs with TPX), and the
// fallback to publishing by the current mode where no counter set can keep
// the modes apart, with the reason.
func TestModeCounters(t *testing.T) {
	tests := []struct {
		name   string
		xcd    int
		modes  map[string]int
		static string // the reason, where the GPU cannot be dynamic
	}{
		{name: "MI300X NPS1", xcd: 8, modes: map[string]int{"SPX": 1, "DPX": 2, "QPX": 4, "CPX": 8}},
		{name: "MI300X NPS4: no whole mode", xcd: 8, modes: map[string]int{"QPX": 4, "CPX": 8}},
		{name: "MI300A: TPX beside DPX and CPX", xcd: 6, modes: map[string]int{"SPX": 1, "DPX": 2, "TPX": 3, "CPX": 6}},
		{name: "modes of 3, 4 and 8 partitions", xcd: 24, modes: map[string]int{"SPX": 1, "A": 3, "B": 4, "C": 8}},
		{name: "one mode: nothing to choose", xcd: 8, modes: map[string]int{"SPX": 1}, static: "only mode SPX can be set"},
		{name: "modes of 6 and 8: 48 tokens, over a counter set's 32", xcd: 24, modes: map[string]int{"SPX": 1, "A": 6, "B": 8},
			static: "modes of 6 and 8 partitions (SPX, A, B) need 48 counters, a counter set holds 32: published by its current mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := modalGPU(tt.xcd, tt.modes)
			if tt.modes["SPX"] == 0 {
				g.Partitioning.Mode = "QPX"
				g.Partitioning.Enabled = true
				for k, pl := range g.Partitioning.Profile("QPX").Placements {
					g.Partitions = append(g.Partitions, inventory.Partition{Kind: inventory.PartitionXCP, Profile: "QPX", Placement: pl, UUID: "GPU-x-xcp" + string(rune('0'+k)), GPUInstanceID: k})
				}
			}
			// Profiles in a fixed order: the map's is random.
			sortProfiles(g.Partitioning)
			inv := &inventory.Node{GPUs: []inventory.GPU{g}}
			res, err := publish.Build("n", inv, nobodyHolds)
			if err != nil {
				t.Fatal(err)
			}
			mode := res.Modes[0]
			if tt.static != "" {
				if mode.Mode == "dynamic" || !strings.Contains(mode.Reason, tt.static) {
					t.Fatalf("mode %s, reason %q; want static because %q", mode.Mode, mode.Reason, tt.static)
				}
				return
			}
			if mode.Mode != "dynamic" {
				t.Fatalf("not dynamic: %s", mode.Reason)
			}
			ts := publishedTokens(t, inv)["GPU-x"]
			if ts == nil {
				t.Fatal("nothing published")
			}
			want := len(tt.modes)
			if tt.modes["SPX"] != 0 {
				want--
			}
			checkTokens(t, tt.name, ts, want)
		})
	}
}

func sortProfiles(pt *inventory.Partitioning) {
	for i := range pt.Profiles {
		for j := i + 1; j < len(pt.Profiles); j++ {
			if len(pt.Profiles[j].Placements) < len(pt.Profiles[i].Placements) {
				pt.Profiles[i], pt.Profiles[j] = pt.Profiles[j], pt.Profiles[i]
			}
		}
	}
}
