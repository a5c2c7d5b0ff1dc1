package nccltopo

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// The real DGX-class file (testdata/SOURCE.md) passes the parser rules,
// and the dgx-h100 file has its shape per GPU: a pci element holding one
// gpu, whose NVSwitch links (class 0x068000) add up to the same 18.
func TestRealTopologyFixture(t *testing.T) {
	real, err := os.ReadFile("testdata/ibm-h100-vsi-topo.xml")
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(real, NCCL); err != nil {
		t.Fatalf("the real file fails the rules: %v", err)
	}
	f, err := Build(machine(t, "dgx-h100"), seq(8), Options{CPUArch: "x86_64"})
	if err != nil {
		t.Fatal(err)
	}
	want, got := shapes8(t, real), shapes8(t, f.XML)
	if len(want) != 8 || len(got) != 8 {
		t.Fatalf("GPUs: real %d, ours %d", len(want), len(got))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("GPU %d: ours %s, the real file %s", i, got[i], want[i])
		}
	}
}

// shapes8 is, per gpu element, its parent's tag, its children's tags and
// the sum of its NVSwitch link counts.
func shapes8(t *testing.T, data []byte) []string {
	p := &parser{s: string(data)}
	root, err := p.parse()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(e, parent *element)
	walk = func(e, parent *element) {
		if e.name == "gpu" {
			sum, tags := 0, map[string]bool{}
			for _, s := range e.subs {
				tags[s.name] = true
				if attrOf(s, "tclass") == NVSwitchClass {
					n, _ := strconv.Atoi(attrOf(s, "count"))
					sum += n
				}
			}
			var ts []string
			for k := range tags {
				ts = append(ts, k)
			}
			out = append(out, parent.name+">gpu>"+strings.Join(ts, ",")+" nvswitch links "+strconv.Itoa(sum))
		}
		for _, s := range e.subs {
			walk(s, e)
		}
	}
	walk(root, nil)
	return out
}

func attrOf(e *element, k string) string {
	for _, a := range e.attrs {
		if a.key == k {
			return a.value
		}
	}
	return ""
}

// Check refuses what NCCL's parser would misread or reject.
func TestCheckRefuses(t *testing.T) {
	ok := `<system version="1">
  <cpu numaid="0" arch="x86_64">
    <pci busid="0000:18:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">
      <gpu dev="0" sm="90" rank="0"/>
    </pci>
  </cpu>
</system>
`
	if err := Check([]byte(ok), NCCL); err != nil {
		t.Fatalf("valid file refused: %v", err)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"tab", "  <cpu", "\t<cpu", "expecting '<'"},
		{"uppercase bus ID", "0000:18:00.0", "0000:1A:00.0", "lowercase bus ID"},
		{"short bus ID", "0000:18:00.0", "18:00.0", "lowercase bus ID"},
		{"class", `class="0x030200"`, `class="3D"`, "PCI class"},
		{"octal", `sm="90"`, `sm="090"`, "decimal"},
		{"missing rank", ` rank="0"`, ``, "rank is required"},
		{"unknown element", `<gpu dev="0" sm="90" rank="0"/>`, `<gpu dev="0" sm="90" rank="0"><xgmi target="0000:19:00.0" count="1" tclass="0x030200"/></gpu>`, "not one the parser reads"},
		{"RCCL version", `version="1"`, `version="2"`, "reads only 1"},
		{"link speed", "32.0 GT/s PCIe", "32 GT/s PCIe", "link speed"},
		{"mismatched close", "</pci>", "</cpu>", "closes pci"},
		{"unterminated", "</system>\n", "", "unterminated system"},
		{"unclosed value", `arch="x86_64"`, `arch="x86'64`, "markup"},
		{"space before />", `rank="0"/>`, `rank="0" />`, "expected a name"},
		{"duplicate attribute", `sm="90"`, `sm="90" sm="80"`, "twice"},
		{"Intel without model", `arch="x86_64"`, `arch="x86_64" vendor="GenuineIntel"`, "needs familyid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := strings.Replace(ok, tc.from, tc.to, 1)
			err := Check([]byte(bad), NCCL)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check = %v, want an error with %q\n%s", err, tc.want, bad)
			}
		})
	}
	if err := Check([]byte(strings.Repeat(" ", maxFileSize+1)), NCCL); err == nil {
		t.Error("an oversized file passed")
	}
}

// Build refuses what no file can describe.
func TestBuildRefuses(t *testing.T) {
	n := machine(t, "mixed-inference")
	for _, tc := range []struct {
		name string
		gpus []int
		want string
	}{
		{"none", nil, "no GPUs"},
		{"two vendors", []int{0, 4}, "two vendors"},
		{"twice", []int{0, 0}, "twice"},
		{"out of range", []int{0, 9}, "does not exist"},
	} {
		if _, err := Build(n, tc.gpus, Options{CPUArch: "x86_64"}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}
