package amdsysfs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/fabric"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// realTree is one real KFD capture from ROCm/k8s-device-plugin's testdata
// (test/fixtures/amd/*/SOURCE.md) and what Tessera must make of it. The
// wanted figures are the capture's own (a CU count is its simd_count over
// simd_per_cu); 0 memory or compute units mean unknown, which must be
// recorded and left out of every device, never published as 0.
type realTree struct {
	name, fixture string
	breakTree     func(t *testing.T, root string) // nil: the capture as is
	gpus          int
	model, gfx    string
	arch          string
	mem           int64   // every GPU's; 0 unknown
	cus           []int64 // per GPU; 0 unknown
	partitions    []int   // per GPU
	partCUs       int64   // every partition's
	islands       int
	bandwidth     int64 // every GPU's fabricBandwidthGBps
	bwUnknown     bool  // every GPU's bandwidth unknown (left out)
	recorded      map[string]int
	logs          map[string]int // text: times logged over two reads
}

// TestRealTrees discovers each real capture twice (a generation change in
// between), checks the core fields, and publishes it with
// --sharing=capacity: no GPU takes the others off the scheduler, nothing
// unknown is published as 0, and every reason is said once.
func TestRealTrees(t *testing.T) {
	for _, tc := range realTrees() {
		t.Run(tc.name, func(t *testing.T) {
			root := copyTree(t, fixture(tc.fixture))
			if tc.breakTree != nil {
				tc.breakTree(t, root)
			}
			n, logs := discoverTwice(t, root)
			if len(n.GPUs) != tc.gpus {
				t.Fatalf("%d GPUs, want %d (%+v)", len(n.GPUs), tc.gpus, n.Unpublished)
			}
			for i, g := range n.GPUs {
				if g.Vendor != inventory.VendorAMD || g.Model != tc.model || g.GFXVersion != tc.gfx || g.Architecture != tc.arch ||
					g.MemoryBytes != tc.mem || g.ComputeUnits != tc.cus[i] || len(g.Partitions) != tc.partitions[i] {
					t.Errorf("GPU %d (%s): %s %q gfx %q arch %q mem %d cus %d partitions %d; want %q gfx %q arch %q mem %d cus %d partitions %d",
						i, g.PCIBusID, g.Vendor, g.Model, g.GFXVersion, g.Architecture, g.MemoryBytes, g.ComputeUnits, len(g.Partitions),
						tc.model, tc.gfx, tc.arch, tc.mem, tc.cus[i], tc.partitions[i])
				}
				for j, p := range g.Partitions {
					if p.ComputeUnits != tc.partCUs || p.MemoryBytes != 0 && tc.mem == 0 || p.GPUInstanceID != j {
						t.Errorf("GPU %d partition %d: %d CUs, %d bytes, index %d", i, j, p.ComputeUnits, p.MemoryBytes, p.GPUInstanceID)
					}
				}
			}
			checkRealFabric(t, n, tc)
			if r := recorded(n); !mapsEqual(r, tc.recorded) {
				t.Errorf("recorded %v, want %v", r, tc.recorded)
			}
			for text, times := range tc.logs {
				if c := strings.Count(logs, text); c != times {
					t.Errorf("%q logged %d times over two reads, want %d", text, c, times)
				}
			}
			checkSaidOnce(t, logs)
			unknownBW := map[string]bool{}
			for _, g := range n.GPUs {
				unknownBW[g.PCIBusID] = tc.bwUnknown
			}
			devs, res := sharedDevices(t, n)
			noZeroes(t, devs, res, unknownBW)
			wantDevs := 0
			for i := range n.GPUs {
				wantDevs += max(1, tc.partitions[i])
			}
			if len(devs) != wantDevs {
				t.Errorf("%d devices published, want %d", len(devs), wantDevs)
			}
		})
	}
}

// checkRealFabric: every GPU in its island with the wanted bandwidth, or
// with the bandwidth marked unknown.
func checkRealFabric(t *testing.T, n *inventory.Node, tc realTree) {
	t.Helper()
	f, err := fabric.Compute(n)
	if err != nil {
		t.Fatal(err)
	}
	islands := map[string]bool{}
	for i, x := range f {
		islands[x.Island] = true
		if x.BandwidthGBps != tc.bandwidth || x.BandwidthUnknown != tc.bwUnknown {
			t.Errorf("GPU %d: fabric bandwidth %d (unknown %v), want %d (unknown %v)", i, x.BandwidthGBps, x.BandwidthUnknown, tc.bandwidth, tc.bwUnknown)
		}
	}
	if len(islands) != tc.islands {
		t.Errorf("%d islands, want %d", len(islands), tc.islands)
	}
}

// checkSaidOnce: no line of the backend's log repeats, over two reads of
// an unchanged tree.
func checkSaidOnce(t *testing.T, logs string) {
	t.Helper()
	seen := map[string]bool{}
	for _, l := range strings.Split(logs, "\n") {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if seen[l] {
			t.Errorf("logged twice: %s", l)
		}
		seen[l] = true
	}
}

func realTrees() []realTree {
	const (
		mi210CUs  = 416 / 4 // simd_count / simd_per_cu in the capture
		mi300XCDs = 152 / 4 // one XCC per CPX partition
		vegaCUs   = 256 / 4
		vegaVRAM  = 17163091968 // the capture's one heap_type 1 bank
		mi308XCDs = 80 / 4      // one XCC per CPX partition
		// Each MI308X partition's VRAM bank: 48 GiB, the last of each
		// card 16 MiB less.
		mi308VRAM = 3*51539607552 + 51522830336
	)
	mi300CUs := slices.Repeat([]int64{8 * mi300XCDs}, 7)
	return []realTree{
		{name: "8x MI210, two xGMI hives, no mem_banks: memory unknown on every GPU, published whole, links known",
			fixture: "real-mi210-8-xgmi", gpus: 8, model: "MI210", gfx: "9.0.10", arch: "cdna2",
			cus: slices.Repeat([]int64{mi210CUs}, 8), partitions: make([]int, 8),
			// Three xGMI links of 50000 MB/s to the hive's other GPUs.
			islands: 2, bandwidth: 3 * 50,
			recorded: map[string]int{"value:memory": 8},
			logs:     map[string]int{"no VRAM mem_banks (heap_type 1 or 2) and local_mem_size 0": 8, "mem_banks is missing": 8}},
		{name: "8x MI300X in CPX, the last card listing 7 partitions: cross-card widths and memory unknown",
			fixture: "real-mi300x-8-cpx", gpus: 8, model: "MI300X", gfx: "9.4.2", arch: "cdna3",
			cus: append(mi300CUs, 7*mi300XCDs), partitions: []int{8, 8, 8, 8, 8, 8, 8, 7}, partCUs: mi300XCDs,
			islands: 1, bwUnknown: true,
			recorded: map[string]int{"value:memory": 8, "value:fabricBandwidthGBps": 8},
			logs:     map[string]int{"max_bandwidth 0 on every xGMI link of this GPU": 8, "mem_banks is missing": 63}},
		{name: "8x MI308X in CPX, with mem_banks: memory known, cross-card widths unknown",
			fixture: "mi308x-cpx", gpus: 8, model: "MI308X", gfx: "9.4.2", arch: "cdna3", mem: mi308VRAM,
			cus: slices.Repeat([]int64{4 * mi308XCDs}, 8), partitions: slices.Repeat([]int{4}, 8), partCUs: mi308XCDs,
			islands: 1, bwUnknown: true,
			recorded: map[string]int{"value:fabricBandwidthGBps": 8},
			logs:     map[string]int{"max_bandwidth 0 on every xGMI link of this GPU": 8, "AMD GPU value unknown": 8}},
		{name: "Vega 10 and its copy at one PCI address, no domain, no DRM entries: both left out, never merged",
			fixture: "real-vega10", gpus: 0, partitions: []int{},
			recorded: map[string]int{"reason:ambiguous": 2},
			logs:     map[string]int{"KFD nodes [1 2] all report PCI address 0000:19:00.0": 2, "AMD GPU left out": 2}},
		{name: "Vega 10 and its copy, told apart by the PCI devices their render nodes link to",
			fixture: "real-vega10", breakTree: vegaDomains, gpus: 2, model: unknownModel, mem: vegaVRAM,
			cus: []int64{vegaCUs, vegaCUs}, partitions: []int{0, 0}, islands: 2,
			recorded: map[string]int{"value:model": 2, "value:gfxVersion": 2},
			logs: map[string]int{
				`device ID 0x6860 (PCI ID 1002:6860) not in the model table, and no KFD name: model \"unknown\"`: 1,
				`pciBusIDs=["0000:19:00.0","0001:19:00.0"]`:                                                      1,
				"properties have no gfx_target_version":                                                          2,
			}},
	}
}

// vegaDomains gives the Vega capture what a host's sysfs has beside KFD:
// each render node's /sys/class/drm link to its PCI device, the copy's in
// PCI domain 0001 (the real GPU's bus and device, as KFD says).
func vegaDomains(t *testing.T, root string) {
	t.Helper()
	for _, d := range []struct{ render, dev string }{
		{"renderD128", "pci0000:00/0000:00:01.1/0000:19:00.0"},
		{"renderD129", "pci0001:00/0001:00:01.1/0001:19:00.0"},
	} {
		dir := filepath.Join(root, "sys/devices", d.dev, "drm", d.render)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(root, "sys/class/drm", d.render)
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("../../devices", d.dev, "drm", d.render), link); err != nil {
			t.Fatal(err)
		}
	}
}
