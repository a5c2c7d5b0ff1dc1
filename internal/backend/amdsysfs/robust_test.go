package amdsysfs

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// discoverTwice discovers root with one backend, moves KFD's generation so
// the backend reads the tree again, and discovers again: what the backend
// logs once per GPU must then still be in the log once.
func discoverTwice(t *testing.T, root string) (*inventory.Node, string) {
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	b, err := New(Options{SysfsRoot: root, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Discover(context.Background()); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, "sys/class/kfd/kfd/topology/generation_id", "2\n")
	n, err := b.Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n, logger.GetSink().(ktesting.Underlier).GetBuffer().String()
}

// recorded counts the node's Unpublished entries: a GPU left out by its
// reason ("reason:ambiguous"), a published GPU's unknown value by the value
// ("value:memory"), as the agent's two gauges count them.
func recorded(n *inventory.Node) map[string]int {
	out := map[string]int{}
	for _, u := range n.Unpublished {
		if u.Value != "" {
			out["value:"+u.Value]++
		} else {
			out["reason:"+string(u.Reason)]++
		}
	}
	return out
}

// sharedDevices publishes n with --sharing=capacity and returns its
// devices by name with the build's result.
func sharedDevices(t *testing.T, n *inventory.Node) (map[string]resourceapi.Device, *publish.Result) {
	t.Helper()
	res, err := publish.Build("n1", n, publish.Options{Partitioning: publish.Static, Sharing: publish.SharingCapacity})
	if err != nil {
		t.Fatalf("one odd GPU failed the node's slices: %v", err)
	}
	devs := map[string]resourceapi.Device{}
	for _, s := range publish.Objects(driverName, "n1", res.Resources) {
		for _, d := range s.Spec.Devices {
			devs[d.Name] = d
		}
	}
	return devs, res
}

// noZeroes fails on any capacity published as 0 and any fabric bandwidth
// published for a GPU whose bandwidth is unknown: unknown is left out.
func noZeroes(t *testing.T, devs map[string]resourceapi.Device, res *publish.Result, unknownBW map[string]bool) {
	t.Helper()
	for name, d := range devs {
		for _, c := range []resourceapi.QualifiedName{publish.CapMemory, publish.CapComputeUnits} {
			if q, ok := d.Capacity[c]; ok && q.Value.Sign() <= 0 {
				t.Errorf("%s: capacity %s published as %s", name, c, q.Value.String())
			}
		}
		a, ok := d.Attributes[publish.AttrFabricBandwidth]
		if unknownBW[res.Devices[name].GPU.PCIBusID] && ok {
			t.Errorf("%s: fabricBandwidthGBps %d published for an unknown bandwidth", name, *a.IntValue)
		}
		if !unknownBW[res.Devices[name].GPU.PCIBusID] && !ok {
			t.Errorf("%s: fabricBandwidthGBps left out of a GPU whose bandwidth is known", name)
		}
	}
}

// oddCase is one host with an odd GPU: what is published, recorded and
// logged, and what else to check.
type oddCase struct {
	name, fixture string
	breakTree     func(t *testing.T, root string) // nil: the fixture as is
	gpus          []string                        // PCI addresses published
	recorded      map[string]int                  // see recorded
	logs          map[string]int                  // log text: times it is logged over two reads
	unknownBW     []string                        // GPUs without fabricBandwidthGBps
	check         func(t *testing.T, n *inventory.Node, devs map[string]resourceapi.Device, res *publish.Result)
}

// TestOddGPUs: one odd GPU (memory, compute units, link widths or model
// unreadable, or two GPUs at one PCI address) never takes the node's other
// GPUs off the scheduler; what is unknown is left out rather than
// published as 0, and said once per GPU and counted.
func TestOddGPUs(t *testing.T) {
	for _, tc := range oddCases() {
		t.Run(tc.name, func(t *testing.T) {
			root := copyTree(t, fixture(tc.fixture))
			if tc.breakTree != nil {
				tc.breakTree(t, root)
			}
			n, logs := discoverTwice(t, root)
			var got []string
			for _, g := range n.GPUs {
				got = append(got, g.PCIBusID)
			}
			if !slices.Equal(got, tc.gpus) {
				t.Errorf("GPUs %v, want %v", got, tc.gpus)
			}
			if r := recorded(n); !mapsEqual(r, tc.recorded) {
				t.Errorf("recorded %v, want %v (%+v)", r, tc.recorded, n.Unpublished)
			}
			for text, times := range tc.logs {
				if c := strings.Count(logs, text); c != times {
					t.Errorf("%q logged %d times over two reads, want %d:\n%s", text, c, times, logs)
				}
			}
			unknownBW := map[string]bool{}
			for _, b := range tc.unknownBW {
				unknownBW[b] = true
			}
			devs, res := sharedDevices(t, n)
			noZeroes(t, devs, res, unknownBW)
			if tc.check != nil {
				tc.check(t, n, devs, res)
			}
		})
	}
}

func mapsEqual(a, b map[string]int) bool {
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

func oddCases() []oddCase {
	mi308x := []string{"0000:0a:00.0", "0000:80:00.0", "0000:a4:00.0", "0000:c8:00.0", "0001:0b:00.0", "0001:81:00.0", "0001:a5:00.0", "0001:c9:00.0"}
	mi300x := []string{"0000:0c:00.0", "0000:22:00.0", "0000:38:00.0", "0000:5c:00.0", "0000:9f:00.0", "0000:af:00.0", "0000:bf:00.0", "0000:df:00.0"}
	mi100 := []string{"0000:23:00.0", "0000:26:00.0", "0000:43:00.0", "0000:46:00.0"}
	return []oddCase{
		{name: "memory unknown: published whole without a memory capacity, the other GPU shared", fixture: "mi210-vram-unknown",
			gpus: []string{"0000:63:00.0", "0000:e3:00.0"}, recorded: map[string]int{"value:memory": 1},
			logs:      map[string]int{"no VRAM mem_banks (heap_type 1 or 2) and local_mem_size 0": 1, "AMD GPU value unknown": 1},
			unknownBW: nil, check: checkMemoryUnknown},
		{name: "a VRAM bank of 4 KiB is no reading: memory unknown, the node still shared", fixture: "mi210-pcie",
			breakTree: func(t *testing.T, root string) {
				writeFile(t, root, "sys/class/kfd/kfd/topology/nodes/3/mem_banks/0/properties", "heap_type 1\nsize_in_bytes 4096\n")
			},
			gpus: []string{"0000:63:00.0", "0000:e3:00.0"}, recorded: map[string]int{"value:memory": 1},
			logs: map[string]int{"VRAM mem_banks total 4096 bytes": 1}, check: checkMemoryUnknown},
		{name: "xGMI widths unknown before gfx90a: fabricBandwidthGBps left out, one island", fixture: "mi100-4-xgmi",
			gpus: mi100, recorded: map[string]int{"value:fabricBandwidthGBps": 4},
			logs: map[string]int{"max_bandwidth 0 on every xGMI link of this GPU": 4}, unknownBW: mi100, check: checkOneXGMIIsland},
		{name: "CPX cards: cross-card widths unknown on every partition", fixture: "mi300x-8-cpx",
			gpus: mi300x, recorded: map[string]int{"value:fabricBandwidthGBps": 8},
			logs: map[string]int{"max_bandwidth 0 on every xGMI link of this GPU": 8}, unknownBW: mi300x, check: checkOneXGMIIsland},
		{name: "real MI308X capture: cross-card widths unknown", fixture: "mi308x-cpx",
			gpus: mi308x, recorded: map[string]int{"value:fabricBandwidthGBps": 8},
			logs: map[string]int{"max_bandwidth 0 on every xGMI link of this GPU": 8}, unknownBW: mi308x, check: checkOneXGMIIsland},
		{name: "MI250X: the 0s of indirect peers stay known, nothing recorded", fixture: "mi250x-4",
			gpus:     []string{"0000:29:00.0", "0000:2c:00.0", "0000:2f:00.0", "0000:32:00.0", "0000:a9:00.0", "0000:ac:00.0", "0000:af:00.0", "0000:b2:00.0"},
			recorded: map[string]int{}, logs: map[string]int{"AMD GPU value unknown": 0}},
		{name: "two GPUs at one bus address, KFD without domains: told apart by their DRM devices", fixture: "vega10-2-domains",
			gpus: []string{"0000:03:00.0", "0000:43:00.0", "0001:03:00.0"}, recorded: map[string]int{"value:model": 3},
			logs:  map[string]int{`device ID 0x6860 (PCI ID 1002:6860) not in the model table: model \"vega10\" taken from the KFD name`: 1, "AMD GPU model not identified": 1, "AMD GPU left out": 0},
			check: checkNotMerged(3)},
		{name: "two GPUs at one bus address and no DRM entries: both left out, the third published", fixture: "vega10-2-domains",
			breakTree: func(t *testing.T, root string) {
				if err := os.RemoveAll(filepath.Join(root, "sys/class/drm")); err != nil {
					t.Fatal(err)
				}
			},
			gpus: []string{"0000:43:00.0"}, recorded: map[string]int{"reason:ambiguous": 2, "value:model": 1},
			logs:  map[string]int{"all left out rather than merged into one GPU": 2, "KFD gives no PCI domain": 2},
			check: checkNotMerged(1)},
		{name: "MI250 or MI250X unsettled (CUs unknown): model unknown, said with the device ID", fixture: "mi250-cus-unknown",
			gpus: []string{"0000:29:00.0", "0000:2c:00.0", "0000:2f:00.0", "0000:32:00.0"}, recorded: map[string]int{"value:model": 2, "value:computeUnits": 2},
			logs:  map[string]int{"device ID 0x740c is an MI250 (104 CUs per GCD) or an MI250X (110), and KFD gives no CU count": 1, "no simd_per_cu to count compute units from simd_count 416": 2},
			check: checkMI250Unsettled},
		{name: "unknown device ID and no KFD name: model unknown, said with the device ID", fixture: "mi308x-cpx",
			breakTree: func(t *testing.T, root string) {
				for _, nd := range []string{"2", "3", "4", "5"} {
					p := filepath.Join(root, "sys/class/kfd/kfd/topology/nodes", nd, "properties")
					b, _ := os.ReadFile(p)
					writeFile(t, root, "sys/class/kfd/kfd/topology/nodes/"+nd+"/properties", string(replace(b, "device_id 29858", "device_id 4660")))
				}
			},
			gpus: mi308x, recorded: map[string]int{"value:model": 1, "value:fabricBandwidthGBps": 8},
			logs: map[string]int{`device ID 0x1234 (PCI ID 1002:1234) not in the model table, and no KFD name: model \"unknown\"`: 1}, unknownBW: mi308x},
	}
}

// checkMemoryUnknown: the GPU of unknown memory is published whole, with
// its compute units but no memory capacity; the other is shared; both
// are allocatable by class, and a share goes to the shared one.
func checkMemoryUnknown(t *testing.T, n *inventory.Node, devs map[string]resourceapi.Device, res *publish.Result) {
	if n.GPUs[1].MemoryBytes != 0 || n.GPUs[0].MemoryBytes != 68702699520 {
		t.Errorf("memory %d, %d; want 68702699520, unknown", n.GPUs[0].MemoryBytes, n.GPUs[1].MemoryBytes)
	}
	if e := res.Devices["gpu-0"]; e.Shared == nil {
		t.Errorf("gpu-0 not shared (%q)", e.Unshared)
	}
	if e := res.Devices["gpu-1"]; e.Shared != nil || e.Unshared != publish.UnsharedMemoryUnknown {
		t.Errorf("gpu-1: shared %+v, unshared %q; want whole, memory-unknown", e.Shared, e.Unshared)
	}
	if _, ok := devs["gpu-1"].Capacity[publish.CapComputeUnits]; !ok {
		t.Error("gpu-1 lost its computeUnits with its memory")
	}
	classes, err := alloctest.Classes()
	if err != nil {
		t.Fatal(err)
	}
	_, ctx := ktesting.NewTestContext(t)
	c := alloctest.NewCluster(publish.Objects(driverName, "n1", res.Resources), classes)
	r := alloctest.Request{Name: "r", Class: "amd.gpu.tessera.dev", Capacity: map[string]string{"memory": "7Gi"}}
	got, err := c.Allocate(ctx, "n1", alloctest.Claim("share", r))
	if err != nil || got == nil || alloctest.Devices(got[0])[0] != "gpu-0" {
		t.Fatalf("a 7Gi share: %v, %v; want gpu-0", got, err)
	}
	got, err = c.Allocate(ctx, "n1", alloctest.Claim("whole", alloctest.Request{Name: "r", Class: "amd.gpu.tessera.dev"}))
	if err != nil || got == nil || alloctest.Devices(got[0])[0] != "gpu-1" {
		t.Errorf("a whole GPU by class: %v, %v; want gpu-1", got, err)
	}
	checkMemorySelectors(t, res)
}

// checkMemorySelectors: what docs/claims.md says of a selector on a memory
// capacity a device lacks. The GPU of unknown memory comes after the known
// one, so an unguarded selector still finds that; once it is taken, the
// unguarded selector meets the GPU without the capacity, a CEL error that
// stops the claim's allocation, while a guarded one passes it over.
func checkMemorySelectors(t *testing.T, res *publish.Result) {
	classes, err := alloctest.Classes()
	if err != nil {
		t.Fatal(err)
	}
	_, ctx := ktesting.NewTestContext(t)
	if i, j := slices.Index(res.Order, "gpu-0"), slices.Index(res.Order, "gpu-1"); i > j {
		t.Errorf("publishing order %v: the GPU of unknown memory before the known one", res.Order)
	}
	const atLeast = `device.capacity["gpu.tessera.dev"].memory.compareTo(quantity("40Gi")) >= 0`
	big := func(cel string) *resourceapi.ResourceClaim {
		return alloctest.Claim("big", alloctest.Request{Name: "r", Class: "amd.gpu.tessera.dev", CEL: []string{cel}})
	}
	c := alloctest.NewCluster(publish.Objects(driverName, "n1", res.Resources), classes)
	got, err := c.Allocate(ctx, "n1", big(atLeast))
	if err != nil || got == nil || alloctest.Devices(got[0])[0] != "gpu-0" {
		t.Fatalf("unguarded selector, both GPUs free: %v, %v; want gpu-0", got, err)
	}
	if got, err = c.Allocate(ctx, "n1", big(atLeast)); err == nil || !strings.Contains(err.Error(), "no such key") {
		t.Errorf("unguarded selector, gpu-0 taken: %v, %v; want a no such key error", got, err)
	}
	if got, err = c.Allocate(ctx, "n1", big(`has(device.capacity["gpu.tessera.dev"].memory) && `+atLeast)); err != nil || got != nil {
		t.Errorf("guarded selector, gpu-0 taken: %v, %v; want no fit and no error", got, err)
	}
}

// checkOneXGMIIsland: unknown widths change nothing but the bandwidth:
// every device keeps fabric xgmi and one island.
func checkOneXGMIIsland(t *testing.T, _ *inventory.Node, devs map[string]resourceapi.Device, _ *publish.Result) {
	islands := map[string]bool{}
	for name, d := range devs {
		if *d.Attributes[publish.AttrFabric].StringValue != "xgmi" {
			t.Errorf("%s: fabric %s", name, *d.Attributes[publish.AttrFabric].StringValue)
		}
		islands[*d.Attributes[publish.AttrFabricIsland].StringValue] = true
	}
	if len(islands) != 1 {
		t.Errorf("%d islands, want 1", len(islands))
	}
}

// checkNotMerged: every published Vega 10 has its own 64 CUs and 16 GiB,
// never two GPUs' worth.
func checkNotMerged(gpus int) func(*testing.T, *inventory.Node, map[string]resourceapi.Device, *publish.Result) {
	return func(t *testing.T, n *inventory.Node, devs map[string]resourceapi.Device, _ *publish.Result) {
		for _, g := range n.GPUs {
			if g.ComputeUnits != 64 || g.MemoryBytes != 16<<30 || g.Model != "vega10" {
				t.Errorf("%s: %s, %d CUs, %d bytes; want vega10, 64, 16Gi", g.PCIBusID, g.Model, g.ComputeUnits, g.MemoryBytes)
			}
		}
		if len(devs) != gpus {
			t.Errorf("%d devices, want %d", len(devs), gpus)
		}
	}
}

// checkMI250Unsettled: the dies whose CUs were read are MI250s of one card;
// the others are "unknown", without computeUnits, and pair with nothing.
func checkMI250Unsettled(t *testing.T, n *inventory.Node, devs map[string]resourceapi.Device, _ *publish.Result) {
	for i, g := range n.GPUs {
		want, cus := "MI250", int64(104)
		if i >= 2 {
			want, cus = unknownModel, 0
		}
		if g.Model != want || g.ComputeUnits != cus || (g.CardID != "") != (i < 2) {
			t.Errorf("%s: model %q, %d CUs, card %q; want %q, %d", g.PCIBusID, g.Model, g.ComputeUnits, g.CardID, want, cus)
		}
	}
	if _, ok := devs["gpu-3"].Capacity[publish.CapComputeUnits]; ok {
		t.Error("gpu-3 publishes computeUnits it does not know")
	}
}
