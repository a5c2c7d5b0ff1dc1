package publish_test

import (
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// oddNode is four AMD GPUs in one xGMI hive whose link widths the driver
// does not report, one of them with no memory read and one with a memory
// reading below the 1Mi shares are counted in, and a PCIe GPU beside them.
func oddNode() *inventory.Node {
	gpu := func(bus string, mem int64) inventory.GPU {
		return inventory.GPU{Vendor: inventory.VendorAMD, Model: "MI300X", Architecture: "cdna3", GFXVersion: "9.4.2",
			UUID: "amd-" + bus, PCIBusID: "0000:" + bus + ":00.0", MemoryBytes: mem, ComputeUnits: 304, NUMANode: 0}
	}
	n := &inventory.Node{GPUs: []inventory.GPU{gpu("0c", 192<<30), gpu("22", 0), gpu("38", 4096), gpu("5c", 192<<30), gpu("9f", 64<<30)}}
	for a := 0; a < 4; a++ {
		for b := a + 1; b < 4; b++ {
			n.Links = append(n.Links, inventory.Link{Kind: inventory.LinkXGMI, A: a, B: b, BandwidthUnknown: true})
		}
	}
	return n
}

// TestUnknownIsLeftOut: an unknown fabric bandwidth and an unknown memory
// are absent from the devices, not published as 0; a PCIe GPU's 0 is a
// fact and stays.
func TestUnknownIsLeftOut(t *testing.T) {
	res, err := publish.Build("n", oddNode(), publish.Options{Partitioning: publish.Static})
	if err != nil {
		t.Fatal(err)
	}
	devs := map[string]resourceapi.Device{}
	for _, s := range publish.Objects("gpu.tessera.dev", "n", res.Resources) {
		for _, d := range s.Spec.Devices {
			devs[d.Name] = d
		}
	}
	for _, name := range []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"} {
		d := devs[name]
		if a, ok := d.Attributes[publish.AttrFabricBandwidth]; ok {
			t.Errorf("%s publishes fabricBandwidthGBps %d, want it left out", name, *a.IntValue)
		}
		if *d.Attributes[publish.AttrFabric].StringValue != "xgmi" {
			t.Errorf("%s: fabric %s, want xgmi", name, *d.Attributes[publish.AttrFabric].StringValue)
		}
	}
	if a, ok := devs["gpu-4"].Attributes[publish.AttrFabricBandwidth]; !ok || *a.IntValue != 0 {
		t.Errorf("PCIe GPU: fabricBandwidthGBps %v, want 0", a)
	}
	if c, ok := devs["gpu-1"].Capacity[publish.CapMemory]; ok {
		t.Errorf("GPU of unknown memory publishes memory %s", c.Value.String())
	}
	// Unknown is not the smallest: the GPU of unknown memory comes last,
	// the 4Ki reading (a known, if odd, value) first.
	if want := []string{"gpu-2", "gpu-4", "gpu-0", "gpu-3", "gpu-1"}; !slices.Equal(res.Order, want) {
		t.Errorf("order %v, want %v", res.Order, want)
	}
}

// TestOddMemoryPublishedWhole: with --sharing=capacity a GPU whose memory is
// unknown, or too small to count shares in, is published whole with the
// reason on its entry, and the node's other GPUs are shared as before; the
// scheduler still hands the odd ones out by class.
func TestOddMemoryPublishedWhole(t *testing.T) {
	res, err := publish.Build("n", oddNode(), publish.Options{Partitioning: publish.Static, Sharing: publish.SharingCapacity})
	if err != nil {
		t.Fatalf("one odd GPU failed the node's slices: %v", err)
	}
	want := map[string]publish.UnsharedReason{"gpu-1": publish.UnsharedMemoryUnknown, "gpu-2": publish.UnsharedMemoryUnknown}
	for _, name := range res.Order {
		e := res.Devices[name]
		if e.Unshared != want[name] || (e.Shared == nil) != (want[name] != "") {
			t.Errorf("%s: shared %+v, unshared %q; want unshared %q", name, e.Shared, e.Unshared, want[name])
		}
	}
	objs := publish.Objects("gpu.tessera.dev", "n", res.Resources)
	classes, err := alloctest.Classes()
	if err != nil {
		t.Fatal(err)
	}
	_, ctx := ktesting.NewTestContext(t)
	c := alloctest.NewCluster(objs, classes)
	// Two 7Gi shares land on one shared GPU; the unshared ones stay free.
	for _, name := range []string{"a", "b"} {
		got, err := c.Allocate(ctx, "n", share(name, "amd.gpu.tessera.dev", "memory", "7Gi"))
		if err != nil || got == nil {
			t.Fatalf("share %s: %v, %v", name, got, err)
		}
		if d := alloctest.Devices(got[0]); len(d) != 1 || want[d[0]] != "" {
			t.Errorf("share %s on %v, want a shared GPU", name, d)
		}
	}
	// Four whole GPUs by class: the two left unshared among them.
	got, err := c.Allocate(ctx, "n", alloctest.Claim("four", alloctest.Request{Name: "r", Class: "amd.gpu.tessera.dev", Count: 4}))
	if err != nil || got == nil {
		t.Fatalf("four whole GPUs: %v, %v", got, err)
	}
	seen := map[string]bool{}
	for _, d := range alloctest.Devices(got[0]) {
		seen[d] = true
	}
	if !seen["gpu-1"] || !seen["gpu-2"] {
		t.Errorf("whole claim got %v, want gpu-1 and gpu-2 among them", alloctest.Devices(got[0]))
	}
}
