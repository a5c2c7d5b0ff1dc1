package sim

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// tinyLines is a small valid machine file; the bad-file cases below replace
// single lines of it, so every expected line number is visible here.
var tinyLines = []string{
	/* 1 */ `name: tiny`,
	/* 2 */ `driverVersion: "580.65.06"`,
	/* 3 */ `profileTables:`,
	/* 4 */ `  t:`,
	/* 5 */ `    - {name: 1g, memory: 10Gi, computeUnits: 16, memorySlices: 1, computeSlices: 1, placements: [0, 1, 2, 3, 4, 5, 6]}`,
	/* 6 */ `    - {name: 3g, memory: 40Gi, computeUnits: 60, memorySlices: 4, computeSlices: 3, placements: [0, 4]}`,
	/* 7 */ `gpuTypes:`,
	/* 8 */ `  h:`,
	/* 9 */ `    vendor: nvidia`,
	/* 10 */ `    model: H100`,
	/* 11 */ `    productName: NVIDIA H100 80GB HBM3`,
	/* 12 */ `    architecture: hopper`,
	/* 13 */ `    computeCapability: "9.0"`,
	/* 14 */ `    memory: 80Gi`,
	/* 15 */ `    computeUnits: 132`,
	/* 16 */ `    partitioning: {kind: mig, enabled: true, memorySlices: 8, computeSlices: 7, profiles: t}`,
	/* 17 */ `gpus:`,
	/* 18 */ `  - {type: h, pciBusID: "0000:18:00.0"}`,
	/* 19 */ `  - {type: h, pciBusID: "0000:2a:00.0"}`,
}

// tiny returns the tiny machine with line n (1-based) replaced by repl
// (n == 0: unchanged) and extra lines appended.
func tiny(n int, repl string, extra ...string) []byte {
	lines := append([]string(nil), tinyLines...)
	if n > 0 {
		lines[n-1] = repl
	}
	return []byte(strings.Join(append(lines, extra...), "\n") + "\n")
}

func TestLoadTiny(t *testing.T) {
	m, err := LoadMachine("tiny.yaml", tiny(0, ""), "node-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Node.GPUs) != 2 || m.Name != "tiny" || m.NodeName != "node-a" {
		t.Fatalf("unexpected machine: %+v", m)
	}
	g := m.Node.GPUs[1]
	if g.DriverVersion != "580.65.6" || g.ComputeCapability != "9.0.0" || g.MemoryBytes != 80<<30 ||
		g.Minor != 1 || g.NUMANode != -1 || g.PCIeRoot != "pci0000:00" || g.Health.State != inventory.Healthy {
		t.Errorf("GPU 1 not filled as documented: %+v", g)
	}
	if !regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`).MatchString(g.UUID) {
		t.Errorf("derived UUID %q does not look like an NVIDIA UUID", g.UUID)
	}
}

func TestBadMachineFiles(t *testing.T) {
	links := []string{`links:`, `  nvlink:`, `    - {a: 0, b: 5, bandwidthGBps: 300}`}
	cases := []struct {
		name string
		data []byte
		want []string // substrings of the error
	}{
		{"unknown field", tiny(15, `    computeUnitz: 132`),
			[]string{"machine tiny.yaml: line 15: gpuTypes.h.computeUnitz: unknown field (known fields: "}},
		{"wrong type", tiny(15, `    computeUnits: many`),
			[]string{`machine tiny.yaml: line 15: gpuTypes.h.computeUnits: want an integer, got "many"`}},
		{"list where a mapping belongs", tiny(16, `    partitioning: [mig]`),
			[]string{"line 16: gpuTypes.h.partitioning: want a mapping, got a list"}},
		{"field twice", tiny(14, "    memory: 80Gi\n    memory: 81Gi"),
			[]string{"line 15: gpuTypes.h.memory: field appears twice"}},
		{"bad PCI ID", tiny(19, `  - {type: h, pciBusID: "0000:zz:00.0"}`),
			[]string{`machine tiny.yaml: line 19: gpus[1].pciBusID: "0000:zz:00.0" is not a PCI bus ID (want DDDD:BB:DD.F)`}},
		{"duplicate PCI ID", tiny(19, `  - {type: h, pciBusID: "0000:18:00.0"}`),
			[]string{"line 19: gpus[1].pciBusID: 0000:18:00.0 is already used by GPU 0 (gpus[0])"}},
		{"duplicate minor", tiny(19, `  - {type: h, pciBusID: "0000:2a:00.0", minor: 0}`),
			[]string{"line 19: gpus[1].minor: 0 is already used by GPU 0 (gpus[0])"}},
		{"duplicate uuid", tiny(19, `  - {type: h, pciBusID: "0000:2a:00.0", uuid: GPU-00000000-0000-0000-0000-000000000001}`,
			`  - {type: h, pciBusID: "0000:3a:00.0", uuid: GPU-00000000-0000-0000-0000-000000000001}`),
			[]string{"line 20: gpus[2].uuid: GPU-00000000-0000-0000-0000-000000000001 is already used by GPU 1"}},
		{"bad uuid", tiny(19, `  - {type: h, pciBusID: "0000:2a:00.0", uuid: GPU-xyz}`),
			[]string{`line 19: gpus[1].uuid: "GPU-xyz" is not an NVIDIA GPU UUID`}},
		{"unknown partition profile", tiny(19, `  - {type: h, pciBusID: "0000:2a:00.0", partitions: [{profile: 2g.20gb, start: 0}]}`),
			[]string{`line 19: gpus[1].partitions[0]: GPU GPU-`, `has no partition profile "2g.20gb" (it has: 1g, 3g)`}},
		{"overlapping initial partitions", tiny(19, `  - {type: h, pciBusID: "0000:2a:00.0", partitions: [{profile: 3g, start: 0}, {profile: 1g, start: 2}]}`),
			[]string{"line 19: gpus[1].partitions[1]: GPU GPU-", "profile 1g at 2:1 overlaps partition MIG-", "(3g at 0:4)"}},
		{"invalid placement", tiny(19, `  - {type: h, pciBusID: "0000:2a:00.0", partitions: [{profile: 3g, start: 2}]}`),
			[]string{"line 19: gpus[1].partitions[0]:", "profile 3g cannot be placed at 2 (valid starts: {0,4})"}},
		{"partitions on a disabled GPU", tiny(19, `  - {type: h, pciBusID: "0000:2a:00.0", partitioningEnabled: false, partitions: [{profile: 1g, start: 0}]}`),
			[]string{"line 19: gpus[1].partitions[0]: GPU 1 (NVIDIA H100 80GB HBM3) has partitioning disabled"}},
		{"partition without start", tiny(19, `  - {type: h, pciBusID: "0000:2a:00.0", partitions: [{profile: 1g}]}`),
			[]string{"line 19: gpus[1].partitions[0].start: is required"}},
		{"missing profile table", tiny(16, `    partitioning: {kind: mig, memorySlices: 8, computeSlices: 7, profiles: nope}`),
			[]string{`line 16: gpuTypes.h.partitioning.profiles: profile table "nope" does not exist`}},
		{"placement past the slices", tiny(6, `    - {name: 3g, memory: 40Gi, computeUnits: 60, memorySlices: 4, computeSlices: 3, placements: [0, 6]}`),
			[]string{"line 6: profileTables.t[1].placements[1]: placement 6:4 runs past the 8 memory slices of gpuTypes.h.partitioning"}},
		{"missing required field", tiny(11, `    # productName left out`),
			[]string{"line 8: gpuTypes.h.productName: is required"}},
		{"bad memory", tiny(14, `    memory: 80GG`),
			[]string{`line 14: gpuTypes.h.memory: "80GG" is not a quantity`}},
		{"unknown GPU type", tiny(18, `  - {type: x, pciBusID: "0000:18:00.0"}`),
			[]string{`line 18: gpus[0].type: GPU type "x" does not exist (gpuTypes has: [h])`}},
		{"count with a per-GPU field", tiny(19, `  - {type: h, count: 2, pciBusID: "0000:2a:00.0"}`),
			[]string{"line 19: gpus[1].pciBusID: cannot be set when count is more than 1"}},
		{"link endpoint out of range", tiny(0, "", links...),
			[]string{"line 22: links.nvlink[0].b: GPU 5 does not exist (the machine has 2 GPUs: 0-1)"}},
		{"duplicate switch plane", tiny(0, "", `links:`, `  nvswitch:`, `    - {plane: p, bandwidthGBps: 450}`, `    - {plane: p, bandwidthGBps: 450}`),
			[]string{`line 23: links.nvswitch[1].plane: plane "p" is already defined at links.nvswitch[0]`}},
		{"switch plane GPU listed twice", tiny(0, "", `links:`, `  nvswitch:`, `    - {plane: p, gpus: [0, 0], bandwidthGBps: 450}`),
			[]string{"line 22: links.nvswitch[0].gpus[1]: GPU 0 is listed twice"}},
		{"xgmi between NVIDIA GPUs", tiny(0, "", `links:`, `  xgmi:`, `    - {bandwidthGBps: 64}`),
			[]string{"line 22: links.xgmi[0]: GPU 0 is a nvidia GPU; xgmi links join amd GPUs only"}},
		{"link to itself", tiny(0, "", `links:`, `  nvlink:`, `    - {a: 1, b: 1, bandwidthGBps: 300}`),
			[]string{"line 22: links.nvlink[0].b: a link joins two different GPUs"}},
		{"link twice", tiny(0, "", `links:`, `  pcie:`, `    - {a: 0, b: 1, bandwidthGBps: 32}`, `    - {a: 1, b: 0, bandwidthGBps: 32}`),
			[]string{"line 23: links.pcie[1]: GPUs 0 and 1 are already linked at links.pcie[0]"}},
		{"link without bandwidth", tiny(0, "", `links:`, `  nvlink:`, `    - {a: 0, b: 1}`),
			[]string{"line 22: links.nvlink[0].bandwidthGBps: must be more than 0"}},
		{"link without an end", tiny(0, "", `links:`, `  nvlink:`, `    - {a: 0, bandwidthGBps: 1}`),
			[]string{"line 22: links.nvlink[0]: a and b are required"}},
		{"boolean of the wrong type", tiny(16, `    partitioning: {kind: mig, enabled: "yes", memorySlices: 8, computeSlices: 7, profiles: t}`),
			[]string{`line 16: gpuTypes.h.partitioning.enabled: want true or false, got "yes"`}},
		{"string where a list belongs", tiny(5, `    - {name: 1g, memory: 10Gi, computeUnits: 16, memorySlices: 1, computeSlices: 1, placements: 0}`),
			[]string{`line 5: profileTables.t[0].placements: want a list, got "0"`}},
		{"profile wider than the GPU", tiny(5, `    - {name: 1g, memory: 10Gi, computeUnits: 16, memorySlices: 9, computeSlices: 8, placements: [0]}`),
			[]string{"line 5: profileTables.t[0].memorySlices: 9 is more than the 8 memory slices", "line 5: profileTables.t[0].computeSlices: 8 is more than the 7 compute slices"}},
		{"profile bigger than the GPU", tiny(5, `    - {name: 1g, memory: 200Gi, computeUnits: 500, memorySlices: 1, computeSlices: 1, placements: [0]}`),
			[]string{"line 5: profileTables.t[0].memory: 200Gi is more than the 80Gi memory of gpuTypes.h", "line 5: profileTables.t[0].computeUnits: 500 is more than the 132 compute units of gpuTypes.h"}},
		{"duplicate profile", tiny(6, `    - {name: 1g, memory: 40Gi, computeUnits: 60, memorySlices: 4, computeSlices: 3, placements: [0, 4]}`),
			[]string{`line 6: profileTables.t[1].name: profile "1g" is already defined at profileTables.t[0]`}},
		{"bad driver version", tiny(2, `driverVersion: R580`),
			[]string{`line 2: driverVersion: "R580" is not a driver version`}},
		{"bad compute capability", tiny(13, `    computeCapability: sm_90`),
			[]string{`line 13: gpuTypes.h.computeCapability: "sm_90" is not a compute capability`}},
		{"bad architecture", tiny(12, `    architecture: Hopper GH100`),
			[]string{`line 12: gpuTypes.h.architecture: "Hopper GH100" is not a lowercase one-word architecture`}},
		{"bad pcie root", tiny(19, `  - {type: h, pciBusID: "0000:2a:00.0", pcieRoot: "0000:00"}`),
			[]string{`line 19: gpus[1].pcieRoot: "0000:00" is not a PCIe root`}},
		{"render minor on NVIDIA", tiny(19, `  - {type: h, pciBusID: "0000:2a:00.0", renderMinor: 128}`),
			[]string{"line 19: gpus[1].renderMinor: only AMD GPUs have render nodes"}},
		{"no GPUs", []byte(strings.Join(append(append([]string(nil), tinyLines[:16]...), "gpus: []"), "\n")),
			[]string{"line 17: gpus: a machine needs at least one GPU"}},
		{"bad vendor", tiny(9, `    vendor: intel`),
			[]string{`line 9: gpuTypes.h.vendor: "intel" is not a vendor (want nvidia or amd)`}},
		{"mig on amd", tiny(9, `    vendor: amd`),
			[]string{"line 13: gpuTypes.h.computeCapability: is for NVIDIA GPUs only", "line 16: gpuTypes.h.partitioning.kind: mig partitioning does not exist on amd GPUs"}},
		{"YAML syntax: unclosed flow list", tiny(10, `    model: [H100`),
			[]string{"machine tiny.yaml: line 11: invalid YAML: did not find expected ',' or ']' (in what starts on line 10)"}},
		{"YAML syntax: bad indentation", tiny(12, `     architecture: hopper`),
			[]string{"machine tiny.yaml: line 12: invalid YAML: mapping values are not allowed in this context"}},
		{"YAML syntax: unclosed quote", tiny(12, "    architecture: \"hopper"),
			[]string{"machine tiny.yaml: line 13: invalid YAML: did not find expected key"}}, // the quote closes on line 13
		{"YAML syntax: tab", tiny(12, "\tarchitecture: hopper"),
			[]string{"machine tiny.yaml: line 12: invalid YAML: found a tab character that violates indentation"}},
		{"YAML syntax: list item among keys", tiny(19, `    type: h`),
			[]string{"machine tiny.yaml: line 19: invalid YAML: did not find expected '-' indicator"}},
		{"empty file", []byte("\n"), []string{"machine tiny.yaml: line 1: the file is empty"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadMachine("tiny.yaml", tc.data, "node-a")
			if err == nil {
				t.Fatalf("loaded a bad machine file:\n%s", tc.data)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestAnchorsAndAliases(t *testing.T) {
	data := []byte(strings.Replace(string(tiny(15, `    computeUnits: &cus 132`, `  - {type: h, pciBusID: "0000:3a:00.0", numaNode: *cus}`)), "\n  - {type: h, pciBusID: \"0000:2a:00.0\"}", "", 1))
	m, err := LoadMachine("tiny.yaml", data, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Node.GPUs[1].NUMANode; got != 132 {
		t.Errorf("alias not followed: numaNode %d", got)
	}
}

func TestAllErrorsReported(t *testing.T) {
	data := tiny(19, `  - {type: h, pciBusID: "0000:zz:00.0", numaNode: -7}`)
	data = []byte(strings.Replace(string(data), "computeUnits: 132", "computeUnits: 0", 1))
	_, err := LoadMachine("tiny.yaml", data, "node-a")
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 errors, one per line, got:\n%v", err)
	}
	for i, want := range []string{"line 15: gpuTypes.h.computeUnits", "line 19: gpus[1].pciBusID", "line 19: gpus[1].numaNode"} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("error %d = %q, want it to contain %q", i, lines[i], want)
		}
	}
}

func TestCountExpansion(t *testing.T) {
	m, err := LoadMachine("tiny.yaml", tiny(19, `  - {type: h, count: 3, numaNode: 1, partitions: [{profile: 3g, start: 4}]}`), "node-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Node.GPUs) != 4 {
		t.Fatalf("want 4 GPUs, got %d", len(m.Node.GPUs))
	}
	seen := map[string]bool{}
	for i, g := range m.Node.GPUs {
		if g.Minor != i {
			t.Errorf("GPU %d minor %d", i, g.Minor)
		}
		if seen[g.PCIBusID] || seen[g.UUID] {
			t.Errorf("GPU %d repeats a bus id or UUID: %s %s", i, g.PCIBusID, g.UUID)
		}
		seen[g.PCIBusID], seen[g.UUID] = true, true
		if i > 0 && (g.NUMANode != 1 || len(g.Partitions) != 1 || g.Partitions[0].GPUInstanceID != 2) {
			t.Errorf("expanded GPU %d lost its entry's fields: %+v", i, g)
		}
	}
	if m.Node.GPUs[1].Partitions[0].UUID == m.Node.GPUs[2].Partitions[0].UUID {
		t.Error("expanded GPUs share a partition UUID")
	}
}

func TestUUIDsDifferPerNode(t *testing.T) {
	a, err := Profile("dgx-h100", "node-a")
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := Profile("dgx-h100", "node-a")
	b, _ := Profile("dgx-h100", "node-b")
	for i := range a.Node.GPUs {
		if a.Node.GPUs[i].UUID != a2.Node.GPUs[i].UUID {
			t.Errorf("GPU %d: UUID not stable for one node", i)
		}
		if a.Node.GPUs[i].UUID == b.Node.GPUs[i].UUID {
			t.Errorf("GPU %d: same UUID on two nodes", i)
		}
	}
	if _, err := LoadMachine("tiny.yaml", tiny(0, ""), ""); err == nil {
		t.Error("an empty node name was accepted")
	}
}

func TestSemverFromDriver(t *testing.T) {
	for in, want := range map[string]string{
		"580.65.06": "580.65.6", "550.54.15": "550.54.15", "535.104.05": "535.104.5",
		"575.51": "575.51.0", "6.12.12": "6.12.12", "470.256.02.1": "470.256.2",
		"6.8.5-amd": "6.8.5", " 580.95.05\n": "580.95.5", "R580": "", "": "",
	} {
		if got := SemverFromDriver(in); got != want {
			t.Errorf("SemverFromDriver(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNormalizePCIBusID(t *testing.T) {
	for in, want := range map[string]string{
		"0000:18:00.0": "0000:18:00.0", "00000000:2A:00.0": "0000:2a:00.0", "0001:C1:1f.7": "0001:c1:1f.7",
		"0000:18:20.0": "", "0000:18:00.8": "", "18:00.0": "", "0000:zz:00.0": "",
	} {
		got, ok := normalizePCIBusID(in)
		if got != want || ok != (want != "") {
			t.Errorf("normalizePCIBusID(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func TestProfileUnknownAndPath(t *testing.T) {
	_, err := Profile("dgx-h1000", "n")
	want := fmt.Sprintf("unknown sim profile %q; available: %s", "dgx-h1000", strings.Join(CatalogNames(), ", "))
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want it to contain %q", err, want)
	}
	if !strings.Contains(err.Error(), "a100-pcie-pairs, dgx-a100, dgx-h100") {
		t.Errorf("names not sorted: %v", err)
	}
	dir := t.TempDir()
	p := dir + "/my-box.yaml"
	if err := writeFile(p, tiny(0, "")); err != nil {
		t.Fatal(err)
	}
	m, err := Profile(p, "n")
	if err != nil || m.Name != "tiny" {
		t.Fatalf("loading by path: %v %v", m, err)
	}
	if _, err := Profile(dir+"/missing.yaml", "n"); err == nil {
		t.Error("a missing file loaded")
	}
	bad := dir + "/bad.yaml"
	_ = writeFile(bad, tiny(15, "    computeUnitz: 1"))
	if _, err := Profile(bad, "n"); err == nil || !strings.Contains(err.Error(), "machine bad.yaml: line 15:") {
		t.Errorf("errors from a file do not name it: %v", err)
	}
}

// TestREADMEExample keeps the README's example machine loadable.
func TestREADMEExample(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "### Example\n\n```yaml\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README has no example")
	}
	m, err := LoadMachine("README example", []byte(example), "node-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Node.GPUs[1].Partitions) != 2 || len(m.Node.Links) != 1 {
		t.Errorf("README example loaded as %+v", m.Node)
	}
}

// Every type error of a file comes in one run, each on its own line naming
// the file: fixing a file takes one round, not one per error.
func TestAllTypeErrorsAtOnce(t *testing.T) {
	lines := append([]string(nil), tinyLines...)
	lines[14] = `    computeUnits: many`
	lines[15] = `    partitioning: [mig]`
	lines[13] = "    memory: 80Gi\n    bogus: 1"
	_, err := LoadMachine("tiny.yaml", []byte(strings.Join(lines, "\n")+"\n"), "n")
	if err == nil {
		t.Fatal("loaded")
	}
	want := []string{
		"machine tiny.yaml: line 15: gpuTypes.h.bogus: unknown field",
		`machine tiny.yaml: line 16: gpuTypes.h.computeUnits: want an integer, got "many"`,
		"machine tiny.yaml: line 17: gpuTypes.h.partitioning: want a mapping, got a list",
	}
	got := strings.Split(err.Error(), "\n")
	if len(got) != len(want) {
		t.Fatalf("%d errors, want %d:\n%s", len(got), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("error %d %q, want %q", i, got[i], w)
		}
	}
}
