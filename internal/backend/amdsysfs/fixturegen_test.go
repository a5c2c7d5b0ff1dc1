package amdsysfs

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestGenerateFixtures checks that the synthesized fixture trees under
// test/fixtures/amd are exactly what the generator below writes, so the
// committed files and the code describing them cannot drift apart. With
// TESSERA_REGEN_FIXTURES=1 it rewrites them instead. The trees are committed
// as plain files (and relative symlinks, as sysfs has them) so
// --sysfs-root=DIR works without this code. Per-node property values are
// modelled on the real captures cited in each fixture's SOURCE.md.
func TestGenerateFixtures(t *testing.T) {
	regen := os.Getenv("TESSERA_REGEN_FIXTURES") == "1"
	for _, m := range fixtureMachines() {
		committed := filepath.Join(fixturesDir, m.name)
		dir := committed
		if !regen {
			dir = filepath.Join(t.TempDir(), m.name)
		}
		if err := os.RemoveAll(filepath.Join(dir, "sys")); err != nil {
			t.Fatal(err)
		}
		if err := m.write(dir); err != nil {
			t.Fatal(err)
		}
		if !regen {
			compareTrees(t, filepath.Join(dir, "sys"), filepath.Join(committed, "sys"))
		}
	}
}

// compareTrees fails on any file, symlink or content that differs.
func compareTrees(t *testing.T, want, got string) {
	t.Helper()
	list := func(root string) map[string]string {
		out := map[string]string{}
		err := filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			switch {
			case info.Mode()&os.ModeSymlink != 0:
				target, err := os.Readlink(p)
				if err != nil {
					return err
				}
				out[rel] = "-> " + target
			case info.Mode().IsRegular():
				data, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				out[rel] = string(data)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	w, g := list(want), list(got)
	var diffs []string
	for k, v := range w {
		if gv, ok := g[k]; !ok {
			diffs = append(diffs, "missing "+k)
		} else if gv != v {
			diffs = append(diffs, "differs "+k)
		}
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			diffs = append(diffs, "extra "+k)
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		if len(diffs) > 10 {
			diffs = append(diffs[:10], fmt.Sprintf("... %d more", len(diffs)-10))
		}
		t.Errorf("%s differs from the generator (run with TESSERA_REGEN_FIXTURES=1 to rewrite):\n%s", got, strings.Join(diffs, "\n"))
	}
}

const fixturesDir = "../../../test/fixtures/amd"

// fxCard is one PCI GPU of a synthesized machine.
type fxCard struct {
	bus                                                int
	root                                               int // root complex bus: pci0000:<root>
	numa                                               int
	deviceID                                           int
	gfx                                                int
	simdPerCU                                          int
	cusPerNode                                         int
	memPerNode                                         int64
	xccPerNode                                         int
	parts                                              int // KFD nodes on the card: 1 (SPX) or more
	uniqueID                                           uint64
	hive                                               uint64
	computeMode, memoryMode, availCompute, availMemory string
	// domain is the card's PCI domain (0 on most hosts).
	domain int
	// kfdName is the KFD node's name file ("ip discovery" when empty, as
	// IP-discovery GPUs have it; older kernels write the ASIC name).
	kfdName string
	// noVRAM: the node lists only a system-memory heap (heap_type 0) and
	// local_mem_size 0, so its memory is unknown. noSimdPerCU: the
	// properties lack simd_per_cu, so its compute units are unknown.
	noVRAM, noSimdPerCU bool
}

type fxMachine struct {
	name    string
	cpus    int
	cards   []fxCard
	driver  string
	xgmiBW  func(a, b int) (mbps, weight int) // card indices; intra-card handled separately
	pciDirs bool
	// tel, when set, gives the cards telemetry files (telemetry.go).
	tel *fxTelemetry
	// noDomain leaves `domain` out of the GPU nodes' properties, as
	// kernels before 4.19 do.
	noDomain bool
}

// fxTelemetry is a machine's telemetry files: card i is i*10+5 % busy at
// (40+i) °C, holds 1/(i+2) of its VRAM and draws 100+10i W.
type fxTelemetry struct {
	powerFile string // power1_average, or power1_input (newer kernels, RDNA3)
	capW      int
	sclkMHz   int
	noHwmon   map[int]bool // cards without a hwmon directory
}

func fixtureMachines() []fxMachine {
	mi300 := func(parts int, cm, mm string) []fxCard {
		buses := []int{0x0c, 0x22, 0x38, 0x5c, 0x9f, 0xaf, 0xbf, 0xdf}
		roots := []int{0x00, 0x20, 0x30, 0x50, 0x80, 0xa0, 0xb0, 0xd0}
		var out []fxCard
		for i, b := range buses {
			out = append(out, fxCard{bus: b, root: roots[i], numa: i / 4, deviceID: 0x74a1, gfx: 90402, simdPerCU: 4,
				cusPerNode: 304 / parts, memPerNode: (192 << 30) / int64(parts), xccPerNode: 8 / parts, parts: parts,
				uniqueID: 0x3b1a0c0d5e6f7000 + uint64(i)*0x1111, hive: 0x1d15c7a0b2e4f301,
				computeMode: cm, memoryMode: mm, availCompute: "SPX, DPX, QPX, CPX", availMemory: "NPS1, NPS4"})
		}
		return out
	}
	mi250 := func() []fxCard {
		var out []fxCard
		for i, b := range []int{0x29, 0x2c, 0x2f, 0x32, 0xa9, 0xac, 0xaf, 0xb2} {
			out = append(out, fxCard{bus: b, root: []int{0x00, 0x00, 0x20, 0x20, 0x80, 0x80, 0xa0, 0xa0}[i], numa: 0, deviceID: 0x740c, gfx: 90010, simdPerCU: 4,
				cusPerNode: 110, memPerNode: 68702699520, xccPerNode: 1, parts: 1, uniqueID: 0x51c2a0f3e4d50000 + uint64(i)*0x0101, hive: 0x2b7d3e4f5a6b7c01})
		}
		return out
	}
	return append([]fxMachine{
		{name: "mi300x-8-spx", cpus: 2, cards: mi300(1, "SPX", "NPS1"), driver: "6.12.12", pciDirs: true,
			xgmiBW: func(a, b int) (int, int) { return 64000, 15 },
			tel:    &fxTelemetry{powerFile: "power1_average", capW: 750, sclkMHz: 2100}},
		{name: "mi300x-8-cpx", cpus: 2, cards: mi300(8, "CPX", "NPS4"), driver: "6.12.12", pciDirs: true,
			tel: &fxTelemetry{powerFile: "power1_average", capW: 750, sclkMHz: 2100},
			// Partitioned cards: KFD knows no link count across cards (real
			// MI308X capture: max_bandwidth 0, weight 41).
			xgmiBW: func(a, b int) (int, int) { return 0, 41 }},
		{name: "mi250x-4", cpus: 1, cards: mi250(), driver: "6.8.5", pciDirs: true,
			xgmiBW: func(a, b int) (int, int) {
				if a/2 == b/2 {
					return 200000, 15 // the card's own two GCDs: 4 links
				}
				if a%2 == b%2 {
					return 50000, 15 // one link between cards
				}
				return 0, 30 // reached through another GCD
			}},
		{name: "mi210-pcie", cpus: 2, driver: "6.7.0", pciDirs: true,
			tel: &fxTelemetry{powerFile: "power1_average", capW: 300, sclkMHz: 1700, noHwmon: map[int]bool{1: true}}, cards: []fxCard{
				{bus: 0x63, root: 0x60, numa: 0, deviceID: 0x740f, gfx: 90010, simdPerCU: 4, cusPerNode: 104, memPerNode: 68702699520, xccPerNode: 1, parts: 1, uniqueID: 0x1901d3a8b1c2e6a6},
				{bus: 0xe3, root: 0xe0, numa: 1, deviceID: 0x740f, gfx: 90010, simdPerCU: 4, cusPerNode: 104, memPerNode: 68702699520, xccPerNode: 1, parts: 1, uniqueID: 0x1901d3a8b1c2e7b7},
			}},
		{name: "w7900", cpus: 1, driver: "", pciDirs: true,
			tel: &fxTelemetry{powerFile: "power1_input", capW: 295, sclkMHz: 2495}, cards: []fxCard{
				{bus: 0x03, root: 0x00, numa: -1, deviceID: 0x7448, gfx: 110000, simdPerCU: 2, cusPerNode: 96, memPerNode: 48 << 30, xccPerNode: 1, parts: 1, uniqueID: 0x6f1e2d3c4b5a6978},
			}},
	}, oddMachines()...)
}

// oddMachines are hosts with one odd GPU each, for what the backend must
// do when a reading is missing or two GPUs look alike (robust_test.go).
func oddMachines() []fxMachine {
	mi210 := fxCard{bus: 0x63, root: 0x60, numa: 0, deviceID: 0x740f, gfx: 90010, simdPerCU: 4, cusPerNode: 104, memPerNode: 68702699520, xccPerNode: 1, parts: 1, uniqueID: 0x1901d3a8b1c2e6a6}
	noVRAM := mi210
	noVRAM.bus, noVRAM.root, noVRAM.numa, noVRAM.uniqueID, noVRAM.noVRAM = 0xe3, 0xe0, 1, 0x1901d3a8b1c2e7b7, true
	var mi100, vega, mi250 []fxCard
	for i, b := range []int{0x23, 0x26, 0x43, 0x46} {
		mi100 = append(mi100, fxCard{bus: b, root: b &^ 0xf, numa: i / 2, deviceID: 0x738c, gfx: 90008, simdPerCU: 4, cusPerNode: 120, memPerNode: 32 << 30,
			xccPerNode: 1, parts: 1, uniqueID: 0x2c4e6a8b0d1f3000 + uint64(i), hive: 0x4d3c2b1a09f8e701})
	}
	for i, at := range [][2]int{{0, 0x03}, {0, 0x43}, {1, 0x03}} {
		vega = append(vega, fxCard{domain: at[0], bus: at[1], root: at[1] &^ 0xf, numa: i % 2, deviceID: 0x6860, gfx: 90000, simdPerCU: 4, cusPerNode: 64,
			memPerNode: 16 << 30, xccPerNode: 1, parts: 1, kfdName: "vega10"})
	}
	for i, b := range []int{0x29, 0x2c, 0x2f, 0x32} {
		mi250 = append(mi250, fxCard{bus: b, root: []int{0x00, 0x00, 0x20, 0x20}[i], numa: 0, deviceID: 0x740c, gfx: 90010, simdPerCU: 4, cusPerNode: 104,
			memPerNode: 68702699520, xccPerNode: 1, parts: 1, uniqueID: 0x61d3b1f4e5a60000 + uint64(i)*0x0101, hive: 0x3c8e4f5a6b7c8d01, noSimdPerCU: i >= 2})
	}
	return []fxMachine{
		{name: "mi210-vram-unknown", cpus: 2, driver: "6.7.0", pciDirs: true, cards: []fxCard{mi210, noVRAM}},
		{name: "mi100-4-xgmi", cpus: 1, driver: "5.18.13", pciDirs: true, cards: mi100,
			// Before gfx90a KFD knows no xGMI link count: every link 0.
			xgmiBW: func(a, b int) (int, int) { return 0, 15 }},
		{name: "vega10-2-domains", cpus: 2, pciDirs: true, noDomain: true, cards: vega},
		{name: "mi250-cus-unknown", cpus: 1, driver: "6.8.5", pciDirs: true, cards: mi250,
			xgmiBW: func(a, b int) (int, int) {
				if a/2 == b/2 {
					return 200000, 15
				}
				if a%2 == b%2 {
					return 50000, 15
				}
				return 0, 30
			}},
	}
}

type fxWriter struct {
	dir string
	err error
}

func (w *fxWriter) file(rel, content string) {
	if w.err != nil {
		return
	}
	p := filepath.Join(w.dir, rel)
	if w.err = os.MkdirAll(filepath.Dir(p), 0o755); w.err == nil {
		w.err = os.WriteFile(p, []byte(content), 0o644)
	}
}

func (w *fxWriter) link(rel, target string) {
	if w.err != nil {
		return
	}
	p := filepath.Join(w.dir, rel)
	if w.err = os.MkdirAll(filepath.Dir(p), 0o755); w.err == nil {
		w.err = os.Symlink(target, p)
	}
}

func props(kv ...any) string {
	var b strings.Builder
	for i := 0; i < len(kv); i += 2 {
		fmt.Fprintf(&b, "%s %v\n", kv[i], kv[i+1])
	}
	return b.String()
}

func (m fxMachine) write(dir string) error {
	w := &fxWriter{dir: dir}
	topo := "sys/class/kfd/kfd/topology"
	w.file(topo+"/generation_id", "1\n")
	w.file(topo+"/system_properties", props("platform_oem", 35498446626881, "platform_id", 71791775140929, "platform_rev", 2))
	if m.driver != "" {
		w.file("sys/module/amdgpu/version", m.driver+"\n")
	}
	var gn []fxNode
	next, render, cardMinor := m.cpus, 128, 1
	for ci, c := range m.cards {
		for p := 0; p < c.parts; p++ {
			gn = append(gn, fxNode{next, ci, p, render, cardMinor})
			next++
			render++
			cardMinor++
		}
	}
	// CPU nodes, as in the real MI308X capture.
	for i := 0; i < m.cpus; i++ {
		nd := fmt.Sprintf("%s/nodes/%d", topo, i)
		w.file(nd+"/gpu_id", "0\n")
		w.file(nd+"/name", "\n")
		w.file(nd+"/properties", props("cpu_cores_count", 64, "simd_count", 0, "mem_banks_count", 1, "io_links_count", 0,
			"gfx_target_version", 0, "vendor_id", 0, "device_id", 0, "location_id", 0, "domain", 0, "drm_render_minor", 0, "hive_id", 0))
		w.file(nd+"/mem_banks/0/properties", props("heap_type", 0, "size_in_bytes", int64(512)<<30, "flags", 0, "width", 64, "mem_clk_max", 4800))
	}
	for _, g := range gn {
		m.writeGPUNode(w, topo, g, gn)
		m.writeDevice(w, g)
	}
	return w.err
}

// fxNode is one GPU KFD node of a synthesized machine.
type fxNode struct {
	id, card, part, render, cardMinor int
}

// writeGPUNode writes KFD node g: gpu_id, name, properties, its memory
// bank and its io_links (PCIe to its CPU node, xGMI to its hive peers).
func (m fxMachine) writeGPUNode(w *fxWriter, topo string, g fxNode, gn []fxNode) {
	c := m.cards[g.card]
	nd := fmt.Sprintf("%s/nodes/%d", topo, g.id)
	loc := c.bus<<8 | g.part
	if c.parts == 1 {
		loc = c.bus << 8
	}
	name := c.kfdName
	if name == "" {
		name = "ip discovery"
	}
	w.file(nd+"/gpu_id", fmt.Sprintf("%d\n", 10000+g.id*977))
	w.file(nd+"/name", name+"\n")
	kv := []any{"cpu_cores_count", 0, "simd_count", c.cusPerNode * c.simdPerCU, "mem_banks_count", 1}
	if !c.noSimdPerCU {
		kv = append(kv, "simd_per_cu", c.simdPerCU)
	}
	kv = append(kv, "gfx_target_version", c.gfx, "vendor_id", 4098, "device_id", c.deviceID, "location_id", loc)
	if !m.noDomain {
		kv = append(kv, "domain", c.domain)
	}
	kv = append(kv, "drm_render_minor", g.render, "hive_id", c.hive, "unique_id", c.uniqueID,
		"num_xcc", c.xccPerNode, "max_engine_clk_ccompute", 3800)
	if c.noVRAM {
		kv = append(kv, "local_mem_size", 0)
	}
	w.file(nd+"/properties", props(kv...))
	if c.noVRAM {
		w.file(nd+"/mem_banks/0/properties", props("heap_type", 0, "size_in_bytes", int64(512)<<30, "flags", 0, "width", 64, "mem_clk_max", 4800))
	} else {
		w.file(nd+"/mem_banks/0/properties", props("heap_type", 1, "size_in_bytes", c.memPerNode, "flags", 0, "width", 8192, "mem_clk_max", 1300))
	}
	li := 0
	cpu := max(c.numa, 0) % m.cpus
	w.file(fmt.Sprintf("%s/io_links/%d/properties", nd, li), props("type", 2, "node_from", g.id, "node_to", cpu, "weight", 20, "min_bandwidth", 312, "max_bandwidth", 64000, "flags", 1))
	li++
	for _, o := range gn {
		if o.id == g.id || c.hive == 0 || m.cards[o.card].hive != c.hive {
			continue
		}
		bw, wt := 819200, 13 // partitions of one card (real MI308X capture)
		if o.card != g.card {
			bw, wt = m.xgmiBW(g.card, o.card)
		}
		w.file(fmt.Sprintf("%s/io_links/%d/properties", nd, li), props("type", 11, "node_from", g.id, "node_to", o.id, "weight", wt, "min_bandwidth", bw, "max_bandwidth", bw, "flags", 1))
		li++
	}
}

// writeDevice writes node g's DRM nodes and, for partition 0, its PCI
// device directory: partition 0's DRM nodes on the PCI device, the others
// on amdgpu_xcp platform devices (amdgpu_xcp.c registers one per extra
// partition).
func (m fxMachine) writeDevice(w *fxWriter, g fxNode) {
	c := m.cards[g.card]
	pciPath := fmt.Sprintf("sys/devices/pci%04x:%02x/%04x:%02x:01.0/%04x:%02x:00.0", c.domain, c.root, c.domain, c.root, c.domain, c.bus)
	drmParent := pciPath
	if g.part > 0 {
		drmParent = fmt.Sprintf("sys/devices/platform/amdgpu_xcp.%d", g.cardMinor)
	}
	w.file(fmt.Sprintf("%s/drm/card%d/dev", drmParent, g.cardMinor), fmt.Sprintf("226:%d\n", g.cardMinor))
	w.file(fmt.Sprintf("%s/drm/renderD%d/dev", drmParent, g.render), fmt.Sprintf("226:%d\n", g.render))
	w.link(fmt.Sprintf("sys/class/drm/renderD%d", g.render), fmt.Sprintf("../../../%s/drm/renderD%d", drmParent, g.render))
	w.link(fmt.Sprintf("sys/class/drm/card%d", g.cardMinor), fmt.Sprintf("../../../%s/drm/card%d", drmParent, g.cardMinor))
	if g.part != 0 || !m.pciDirs {
		return
	}
	w.file(pciPath+"/vendor", "0x1002\n")
	w.file(pciPath+"/device", fmt.Sprintf("0x%04x\n", c.deviceID))
	w.file(pciPath+"/numa_node", fmt.Sprintf("%d\n", c.numa))
	if c.computeMode != "" {
		w.file(pciPath+"/current_compute_partition", c.computeMode+"\n")
		w.file(pciPath+"/available_compute_partition", c.availCompute+"\n")
		w.file(pciPath+"/current_memory_partition", c.memoryMode+"\n")
		w.file(pciPath+"/available_memory_partition", c.availMemory+"\n")
	}
	w.link(fmt.Sprintf("sys/bus/pci/devices/%04x:%02x:00.0", c.domain, c.bus), "../../../../"+pciPath)
	if m.tel != nil {
		m.tel.write(w, pciPath, g.card, c)
	}
}

// write lays out card i's telemetry files under its PCI directory; its
// hwmon is hwmon<i+2> (hwmon0 and 1 are the CPUs' on a host).
func (tel *fxTelemetry) write(w *fxWriter, pciPath string, i int, c fxCard) {
	total := c.memPerNode * int64(c.parts)
	w.file(pciPath+"/gpu_busy_percent", fmt.Sprintf("%d\n", i*10+5))
	w.file(pciPath+"/mem_info_vram_total", fmt.Sprintf("%d\n", total))
	w.file(pciPath+"/mem_info_vram_used", fmt.Sprintf("%d\n", total/int64(i+2)))
	if tel.noHwmon[i] {
		return
	}
	hw := fmt.Sprintf("%s/hwmon/hwmon%d", pciPath, i+2)
	w.file(hw+"/name", "amdgpu\n")
	w.file(hw+"/temp1_input", fmt.Sprintf("%d\n", (40+i)*1000))
	w.file(hw+"/"+tel.powerFile, fmt.Sprintf("%d\n", (100+10*i)*1000000))
	w.file(hw+"/power1_cap", fmt.Sprintf("%d\n", tel.capW*1000000))
	w.file(hw+"/freq1_input", fmt.Sprintf("%d\n", tel.sclkMHz*1000000))
}
