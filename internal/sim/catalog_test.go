package sim

import (
	"slices"
	"testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

const (
	mib = int64(1) << 20
	gib = int64(1) << 30
)

func TestCatalogLoads(t *testing.T) {
	want := []string{"a100-pcie-pairs", "dgx-a100", "dgx-h100", "dgx-h100-mig", "gb200-nvl72-tray", "gb300-nvl72-tray", "hgx-h200", "l4-4", "l4-4-r615", "mi300x-8", "mi325x-8", "mixed-inference", "t4-2"}
	if got := CatalogNames(); !slices.Equal(got, want) {
		t.Fatalf("CatalogNames() = %v, want %v", got, want)
	}
	for _, name := range want {
		m := mustProfile(t, name)
		if m.Name != name {
			t.Errorf("%s: name field is %q", name, m.Name)
		}
		if m.Description == "" {
			t.Errorf("%s: no description", name)
		}
	}
}

// TestCatalogMachines pins each machine's shape.
func TestCatalogMachines(t *testing.T) {
	cases := []struct {
		name        string
		models      []string // per GPU; one entry = all GPUs
		memory      []int64
		cus         []int64
		links       map[inventory.LinkKind]int
		bandwidth   int64 // of every link
		numa        map[int]int
		partitioned int // GPUs with partitioning enabled
	}{
		{name: "dgx-h100", models: rep("H100", 8), memory: []int64{81559 * mib}, cus: []int64{132},
			links: map[inventory.LinkKind]int{inventory.LinkNVSwitch: 8}, bandwidth: 450, numa: map[int]int{0: 4, 1: 4}},
		{name: "dgx-h100-mig", models: rep("H100", 8), memory: []int64{81559 * mib}, cus: []int64{132},
			links: map[inventory.LinkKind]int{inventory.LinkNVSwitch: 8}, bandwidth: 450, numa: map[int]int{0: 4, 1: 4}, partitioned: 2},
		{name: "dgx-a100", models: rep("A100", 8), memory: []int64{40537 * mib}, cus: []int64{108},
			links: map[inventory.LinkKind]int{inventory.LinkNVSwitch: 8}, bandwidth: 300, numa: map[int]int{3: 2, 1: 2, 7: 2, 5: 2}},
		{name: "hgx-h200", models: rep("H200", 8), memory: []int64{143771 * mib}, cus: []int64{132},
			links: map[inventory.LinkKind]int{inventory.LinkNVSwitch: 8}, bandwidth: 450, numa: map[int]int{0: 4, 1: 4}},
		{name: "mi300x-8", models: rep("MI300X", 8), memory: []int64{192 * gib}, cus: []int64{304},
			links: map[inventory.LinkKind]int{inventory.LinkXGMI: 28}, bandwidth: 64, numa: map[int]int{0: 4, 1: 4}},
		{name: "mi325x-8", models: rep("MI325X", 8), memory: []int64{256 * gib}, cus: []int64{304},
			links: map[inventory.LinkKind]int{inventory.LinkXGMI: 28}, bandwidth: 64, numa: map[int]int{0: 4, 1: 4}},
		{name: "a100-pcie-pairs", models: rep("A100", 4), memory: []int64{81920 * mib}, cus: []int64{108},
			links: map[inventory.LinkKind]int{inventory.LinkNVLink: 2}, bandwidth: 300, numa: map[int]int{0: 2, 1: 2}},
		{name: "l4-4", models: rep("L4", 4), memory: []int64{23034 * mib}, cus: []int64{58},
			links: map[inventory.LinkKind]int{inventory.LinkPCIe: 2}, bandwidth: 32, numa: map[int]int{0: 2, 1: 2}},
		{name: "l4-4-r615", models: rep("L4", 4), memory: []int64{23034 * mib}, cus: []int64{58},
			links: map[inventory.LinkKind]int{inventory.LinkPCIe: 2}, bandwidth: 32, numa: map[int]int{0: 2, 1: 2}},
		{name: "t4-2", models: rep("T4", 2), memory: []int64{15360 * mib}, cus: []int64{40},
			links: map[inventory.LinkKind]int{}, numa: map[int]int{0: 1, 1: 1}},
		{name: "mixed-inference", models: []string{"A100", "A100", "T4", "T4", "MI210"},
			memory: []int64{81920 * mib, 81920 * mib, 15360 * mib, 15360 * mib, 65520 * mib}, cus: []int64{108, 108, 40, 40, 104},
			links: map[inventory.LinkKind]int{inventory.LinkNVLink: 1}, bandwidth: 300, numa: map[int]int{0: 3, 1: 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := mustProfile(t, tc.name)
			gpus := m.Node.GPUs
			if len(gpus) != len(tc.models) {
				t.Fatalf("%d GPUs, want %d", len(gpus), len(tc.models))
			}
			numa := map[int]int{}
			partitioned := 0
			for i, g := range gpus {
				if g.Model != tc.models[i] {
					t.Errorf("GPU %d model %s, want %s", i, g.Model, tc.models[i])
				}
				if want := pick(tc.memory, i); g.MemoryBytes != want {
					t.Errorf("GPU %d memory %d, want %d", i, g.MemoryBytes, want)
				}
				if want := pick(tc.cus, i); g.ComputeUnits != want {
					t.Errorf("GPU %d compute units %d, want %d", i, g.ComputeUnits, want)
				}
				if g.DriverVersion == "" || SemverFromDriver(g.DriverVersion) != g.DriverVersion {
					t.Errorf("GPU %d driver version %q is not semver", i, g.DriverVersion)
				}
				if (g.Vendor == inventory.VendorNVIDIA) != (g.ComputeCapability != "") || (g.Vendor == inventory.VendorAMD) != (g.GFXVersion != "") {
					t.Errorf("GPU %d: vendor %s with cc %q gfx %q", i, g.Vendor, g.ComputeCapability, g.GFXVersion)
				}
				numa[g.NUMANode]++
				if g.Partitioning != nil && g.Partitioning.Enabled {
					partitioned++
				}
			}
			if !mapsEqual(numa, tc.numa) {
				t.Errorf("NUMA split %v, want %v", numa, tc.numa)
			}
			if partitioned != tc.partitioned {
				t.Errorf("%d GPUs partitioned, want %d", partitioned, tc.partitioned)
			}
			kinds := map[inventory.LinkKind]int{}
			for _, l := range m.Node.Links {
				kinds[l.Kind]++
				if l.BandwidthGBps != tc.bandwidth {
					t.Errorf("link %+v bandwidth, want %d", l, tc.bandwidth)
				}
			}
			if !mapsEqual(kinds, tc.links) {
				t.Errorf("links %v, want %v", kinds, tc.links)
			}
		})
	}
}

func TestDGXH100Details(t *testing.T) {
	m := mustProfile(t, "dgx-h100")
	wantBus := []string{"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0", "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"}
	for i, g := range m.Node.GPUs {
		if g.PCIBusID != wantBus[i] || g.Minor != i || g.ProductName != "NVIDIA H100 80GB HBM3" || g.ComputeCapability != "9.0.0" || g.DriverVersion != "580.65.6" {
			t.Errorf("GPU %d: %+v", i, g)
		}
		if wantNUMA := i / 4; g.NUMANode != wantNUMA {
			t.Errorf("GPU %d on NUMA %d, want %d", i, g.NUMANode, wantNUMA)
		}
		p := g.Partitioning
		if p == nil || p.Kind != inventory.PartitionMIG || p.Enabled || p.ModeChangeNeedsReset || p.MemorySlices != 8 || p.ComputeSlices != 7 {
			t.Errorf("GPU %d partitioning %+v", i, p)
		}
		if len(g.Partitions) != 0 {
			t.Errorf("GPU %d ships with partitions", i)
		}
	}
	for i, l := range m.Node.Links {
		if l.Kind != inventory.LinkNVSwitch || l.A != i || l.Switch != "nvswitch0" {
			t.Errorf("link %d: %+v, want GPU %d on the one plane", i, l, i)
		}
	}
	a100 := mustProfile(t, "dgx-a100")
	if !a100.Node.GPUs[0].Partitioning.ModeChangeNeedsReset {
		t.Error("A100 MIG mode change must need a reset")
	}
}

// profileTable returns the profile table of the first partitionable GPU.
func profileTable(t *testing.T, machine string) *inventory.Partitioning {
	t.Helper()
	for _, g := range mustProfile(t, machine).Node.GPUs {
		if g.Partitioning != nil {
			return g.Partitioning
		}
	}
	t.Fatalf("%s has no partitionable GPU", machine)
	return nil
}

func profileByName(t *testing.T, pt *inventory.Partitioning, name string) inventory.PartitionProfile {
	t.Helper()
	for _, p := range pt.Profiles {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no profile %s", name)
	return inventory.PartitionProfile{}
}

func TestH100MIGTable(t *testing.T) {
	pt := profileTable(t, "dgx-h100")
	want := map[string]struct {
		starts        []int
		size, compute int
		sms           int64
	}{
		"1g.10gb":    {[]int{0, 1, 2, 3, 4, 5, 6}, 1, 1, 16},
		"1g.10gb+me": {[]int{0, 1, 2, 3, 4, 5, 6}, 1, 1, 16},
		"1g.20gb":    {[]int{0, 2, 4, 6}, 2, 1, 26},
		"2g.20gb":    {[]int{0, 2, 4}, 2, 2, 32},
		"3g.40gb":    {[]int{0, 4}, 4, 3, 60},
		"4g.40gb":    {[]int{0}, 4, 4, 64},
		"7g.80gb":    {[]int{0}, 8, 7, 132},
	}
	if len(pt.Profiles) != len(want) {
		t.Errorf("%d profiles, want %d", len(pt.Profiles), len(want))
	}
	for name, w := range want {
		p := profileByName(t, pt, name)
		var starts []int
		for _, pl := range p.Placements {
			starts = append(starts, pl.Start)
			if pl.Size != w.size {
				t.Errorf("%s placement %+v, want size %d", name, pl, w.size)
			}
		}
		if !slices.Equal(starts, w.starts) || p.MemorySlices != w.size || p.ComputeSlices != w.compute || p.ComputeUnits != w.sms {
			t.Errorf("%s = %+v", name, p)
		}
	}
	if n := len(profileByName(t, pt, "1g.10gb").Placements); n != 7 {
		t.Errorf("1g.10gb has %d placements, want 7", n)
	}
	full := profileByName(t, pt, "7g.80gb")
	if full.Placements[0] != (inventory.Placement{Start: 0, Size: 8}) {
		t.Errorf("7g.80gb must occupy all 8 memory slices: %+v", full.Placements)
	}
	if me := profileByName(t, pt, "1g.10gb+me"); me.Engines["ofa"] != 1 || profileByName(t, pt, "1g.10gb").Engines["ofa"] != 0 {
		t.Error("only the +me profile (and 7g) carries the OFA")
	}
}

// TestAllProfileTablesFit checks every partitionable GPU of the catalogue.
func TestAllProfileTablesFit(t *testing.T) {
	for _, name := range CatalogNames() {
		for i, g := range mustProfile(t, name).Node.GPUs {
			pt := g.Partitioning
			if pt == nil {
				continue
			}
			for _, p := range pt.Profiles {
				if p.MemoryBytes <= 0 || p.MemoryBytes > g.MemoryBytes || p.ComputeUnits <= 0 || p.ComputeUnits > g.ComputeUnits {
					t.Errorf("%s GPU %d %s: memory %d / %d, CUs %d / %d", name, i, p.Name, p.MemoryBytes, g.MemoryBytes, p.ComputeUnits, g.ComputeUnits)
				}
				if p.ComputeSlices > pt.ComputeSlices || len(p.Placements) == 0 {
					t.Errorf("%s GPU %d %s: %d compute slices of %d, %d placements", name, i, p.Name, p.ComputeSlices, pt.ComputeSlices, len(p.Placements))
				}
				for _, pl := range p.Placements {
					if pl.Start < 0 || pl.Start+pl.Size > pt.MemorySlices || pl.Size != p.MemorySlices {
						t.Errorf("%s GPU %d %s: placement %+v outside %d memory slices", name, i, p.Name, pl, pt.MemorySlices)
					}
					if pt.Kind == inventory.PartitionMIG {
						if _, ok := migGPUInstanceID(pt.MemorySlices, pl); !ok {
							t.Errorf("%s %s: placement %+v fits no GPU instance id", name, p.Name, pl)
						}
					}
				}
			}
		}
	}
}

// TestDGXH100MIGInstances checks the pre-cut instances and their NVIDIA
// GPU instance ids (the 3-2-1-1 example of the MIG user guide prints ids 2,
// 7, 4, 8 for 3g@4, 1g@0, 2g@2, 1g@1).
func TestDGXH100MIGInstances(t *testing.T) {
	m := mustProfile(t, "dgx-h100-mig")
	g6, g7 := m.Node.GPUs[6], m.Node.GPUs[7]
	if len(g6.Partitions) != 7 {
		t.Fatalf("GPU 6 has %d partitions, want 7", len(g6.Partitions))
	}
	for i, p := range g6.Partitions {
		if p.Profile != "1g.10gb" || p.Placement != (inventory.Placement{Start: i, Size: 1}) || p.GPUInstanceID != 7+i {
			t.Errorf("GPU 6 partition %d: %+v", i, p)
		}
	}
	type want struct {
		profile string
		start   int
		gi      int
	}
	var got []want
	for _, p := range g7.Partitions {
		got = append(got, want{p.Profile, p.Placement.Start, p.GPUInstanceID})
	}
	if exp := []want{{"1g.10gb", 0, 7}, {"1g.10gb", 1, 8}, {"2g.20gb", 2, 4}, {"3g.40gb", 4, 2}}; !slices.Equal(got, exp) {
		t.Errorf("GPU 7 partitions %v, want %v", got, exp)
	}
	uuids := map[string]bool{}
	for _, g := range m.Node.GPUs {
		for _, p := range g.Partitions {
			if uuids[p.UUID] || len(p.UUID) != len("MIG-")+36 || p.UUID[:4] != "MIG-" || p.MemoryBytes == 0 || p.Kind != inventory.PartitionMIG {
				t.Errorf("partition %+v", p)
			}
			uuids[p.UUID] = true
		}
	}
}

func TestMI300XDetails(t *testing.T) {
	m := mustProfile(t, "mi300x-8")
	for i, g := range m.Node.GPUs {
		if g.Vendor != inventory.VendorAMD || g.GFXVersion != "9.4.2" || g.Architecture != "cdna3" || g.Minor != i+1 || g.RenderMinor != 128+i || len(g.UUID) != 16 {
			t.Errorf("GPU %d: %+v", i, g)
		}
		if p := g.Partitioning; p == nil || p.Kind != inventory.PartitionXCP || p.Enabled || len(p.Profiles) != 4 {
			t.Errorf("GPU %d partitioning %+v", i, p)
		}
	}
	peers := map[int]int{}
	for _, l := range m.Node.Links {
		peers[l.A]++
		peers[l.B]++
	}
	for i := 0; i < 8; i++ {
		if peers[i] != 7 {
			t.Errorf("GPU %d has %d xGMI peers, want 7", i, peers[i])
		}
	}
	mixed := mustProfile(t, "mixed-inference")
	if g := mixed.Node.GPUs[4]; g.GFXVersion != "9.0.10" || g.DriverVersion != "6.12.12" || g.Minor != 0 || g.RenderMinor != 128 {
		t.Errorf("MI210: %+v", g)
	}
	if l := mixed.Node.Links[0]; l.Kind != inventory.LinkNVLink || l.A != 0 || l.B != 1 {
		t.Errorf("mixed-inference link %+v", l)
	}
	l4 := mustProfile(t, "l4-4")
	for i, g := range l4.Node.GPUs {
		if want := []string{"pci0000:00", "pci0000:80"}[i/2]; g.PCIeRoot != want || g.Partitioning != nil {
			t.Errorf("L4 %d: root %s, partitioning %v", i, g.PCIeRoot, g.Partitioning)
		}
	}
}

func rep(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func pick(v []int64, i int) int64 {
	if len(v) == 1 {
		return v[0]
	}
	return v[i]
}

func mapsEqual[K comparable](a, b map[K]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
