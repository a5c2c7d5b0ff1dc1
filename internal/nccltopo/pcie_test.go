package nccltopo

import (
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// TestPCIeTreeAndNVMLIndex: GPUs behind one PCIe switch sit under its
// bridges (shared, root port first), so a NIC NCCL finds behind that switch
// is PIX/PXB away; a GPU whose bridges are unknown sits under its CPU; and
// dev is the GPU's NVML index in the container (PCI bus order of the
// claim's GPUs), not its rank, whenever the two differ.
func TestPCIeTreeAndNVMLIndex(t *testing.T) {
	gpu := func(bus string, numa int, bridges ...string) inventory.GPU {
		return inventory.GPU{Vendor: inventory.VendorNVIDIA, Architecture: "hopper", ComputeCapability: "9.0",
			PCIBusID: bus, NUMANode: numa, PCIeBridges: bridges, UUID: "GPU-" + bus}
	}
	n := &inventory.Node{GPUs: []inventory.GPU{
		gpu("0000:9a:00.0", 1),
		gpu("0000:18:00.0", 0, "0000:15:01.0", "0000:16:00.0", "0000:17:00.0"),
		gpu("0000:19:00.0", 0, "0000:15:01.0", "0000:16:00.0", "0000:17:01.0"),
	}}
	// Rank order starts with NUMA node 0: 18, 19, then 9a.
	f, err := Build(n, []int{0, 1, 2}, Options{CPUArch: "x86_64"})
	if err != nil {
		t.Fatal(err)
	}
	xml := string(f.XML)
	for _, want := range []string{
		// One root port and one switch for both GPUs behind it, each
		// under its own down port.
		`<pci busid="0000:15:01.0" class="0x060400"`,
		"      <pci busid=\"0000:16:00.0\" class=\"0x060400\"",
		"        <pci busid=\"0000:17:00.0\" class=\"0x060400\"",
		"          <pci busid=\"0000:18:00.0\" class=\"0x030200\"",
		"        <pci busid=\"0000:17:01.0\" class=\"0x060400\"",
		// The GPU without known bridges, under its CPU.
		"    <pci busid=\"0000:9a:00.0\" class=\"0x030200\"",
		// NVML numbers them 18, 19, 9a; ranks are the same here but the
		// GPU of node 1 came first in the inventory.
		`<gpu dev="0" sm="90" rank="0"`, `<gpu dev="1" sm="90" rank="1"`, `<gpu dev="2" sm="90" rank="2"`,
	} {
		if !strings.Contains(xml, want) {
			t.Errorf("file lacks %q:\n%s", want, xml)
		}
	}
	if c := strings.Count(xml, `busid="0000:16:00.0"`); c != 1 {
		t.Errorf("the switch is written %d times, want once:\n%s", c, xml)
	}
}

// TestNVMLIndexDiffersFromRank: a DGX A100 claim of GPUs on two NUMA nodes
// whose ranks start on the higher bus IDs (NUMA node 1 before node 3): dev follows the bus IDs.
func TestNVMLIndexDiffersFromRank(t *testing.T) {
	n := machine(t, "dgx-a100")
	f, err := Build(n, []int{0, 1, 2, 3}, Options{CPUArch: "x86_64"})
	if err != nil {
		t.Fatal(err)
	}
	first := n.GPUs[f.Order[0]].PCIBusID
	idx := strings.Index(string(f.XML), `busid="`+first+`"`)
	if idx < 0 {
		t.Fatalf("rank 0's GPU %s not in the file", first)
	}
	rest := string(f.XML)[idx:]
	gpuTag := rest[strings.Index(rest, "<gpu"):]
	gpuTag = gpuTag[:strings.Index(gpuTag, ">")]
	lower := 0
	for _, i := range []int{0, 1, 2, 3} {
		if n.GPUs[i].PCIBusID < first {
			lower++
		}
	}
	if want := `dev="` + itoa(lower) + `"`; !strings.Contains(gpuTag, want) || !strings.Contains(gpuTag, `rank="0"`) {
		t.Errorf("rank 0's GPU %s: %s, want %s (its place in bus order)", first, gpuTag, want)
	}
}
