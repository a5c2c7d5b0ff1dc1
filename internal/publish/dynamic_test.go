package publish_test

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
)

var dynamic = publish.Options{Partitioning: publish.Dynamic}

func dynamicCluster(t testing.TB, machine string) (*alloctest.Cluster, *publish.Result) {
	t.Helper()
	classes, err := alloctest.Classes()
	if err != nil {
		t.Fatal(err)
	}
	objs, res := alloctest.PublishSimWith(t, machine, machine, dynamic)
	return alloctest.NewCluster(objs, classes), res
}

func migClaim(name, profile string) *resourceapi.ResourceClaim {
	return alloctest.Claim(name, req("mig.gpu.tessera.dev", 1, fmt.Sprintf(profileIs, profile)))
}

func wholeClaim(name string) *resourceapi.ResourceClaim {
	return alloctest.Claim(name, req("nvidia.gpu.tessera.dev", 1))
}

// h100Instances is the "Number of Instances" column of the H100 80GB table
// in NVIDIA's MIG user guide: how many of each profile one GPU holds.
var h100Instances = map[string]int{"1g.10gb": 7, "1g.10gb+me": 1, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1}

func TestDynamicLayoutWithinAPILimits(t *testing.T) {
	objs, res := alloctest.PublishSimWith(t, "dgx-h100", "node-with-a-rather-long-name-0123456789", dynamic)
	if len(res.Order) != 8*26 {
		t.Errorf("%d devices, want 8 whole GPUs + 8x25 placements", len(res.Order))
	}
	sets := map[string]map[string]int64{}
	var deviceSlices, counterSlices int
	for _, s := range objs {
		if len(s.Spec.Devices) > 0 && len(s.Spec.SharedCounters) > 0 {
			t.Fatalf("slice %s holds devices and counters", s.GenerateName)
		}
		if len(s.Spec.SharedCounters) > 0 {
			counterSlices++
		} else {
			deviceSlices++
		}
		if n := len(s.Spec.SharedCounters); n > publish.MaxCounterSetsPerSlice {
			t.Errorf("slice %s: %d counter sets", s.GenerateName, n)
		}
		if n := len(s.Spec.Devices); n > publish.MaxDevicesPerSlice {
			t.Errorf("slice %s: %d devices", s.GenerateName, n)
		}
		for _, cs := range s.Spec.SharedCounters {
			if len(cs.Counters) > publish.MaxCountersPerSet {
				t.Errorf("counter set %s: %d counters", cs.Name, len(cs.Counters))
			}
			sets[cs.Name] = map[string]int64{}
			for name, c := range cs.Counters {
				if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
					t.Errorf("counter %s/%s: %v", cs.Name, name, errs)
				}
				sets[cs.Name][name] = c.Value.Value()
			}
		}
	}
	if deviceSlices != 8 || counterSlices != 1 {
		t.Errorf("%d device slices and %d counter slices, want 8 (a whole GPU and a GPU's placements each) and 1", deviceSlices, counterSlices)
	}
	// Memory slices always; of the other H100 limits only the one OFA binds
	// (two 1g.10gb+me), compute slices never exceed 7 without overlapping.
	want := map[string]int64{"ofa": 1}
	for k := 0; k < 8; k++ {
		want[fmt.Sprintf("memory-slice-%d", k)] = 1
	}
	for name, got := range sets {
		if !mapsEqual(got, want) {
			t.Errorf("counter set %s = %v, want %v", name, got, want)
		}
	}
	for _, s := range objs {
		for _, d := range s.Spec.Devices {
			if len(d.ConsumesCounters) != 1 {
				t.Fatalf("device %s consumes from %d counter sets, want 1", d.Name, len(d.ConsumesCounters))
			}
			cc := d.ConsumesCounters[0]
			set, ok := sets[cc.CounterSet]
			if !ok {
				t.Fatalf("device %s consumes from unknown set %s", d.Name, cc.CounterSet)
			}
			e := res.Devices[d.Name]
			got := map[string]int64{}
			for name, c := range cc.Counters {
				if _, ok := set[name]; !ok {
					t.Errorf("device %s consumes unknown counter %s", d.Name, name)
				}
				got[name] = c.Value.Value()
			}
			if e.Carve == nil {
				if !mapsEqual(got, set) {
					t.Errorf("whole GPU %s consumes %v, want all of %v", d.Name, got, set)
				}
				continue
			}
			wantUse := map[string]int64{}
			for k := e.Carve.Placement.Start; k < e.Carve.Placement.Start+e.Carve.Placement.Size; k++ {
				wantUse[fmt.Sprintf("memory-slice-%d", k)] = 1
			}
			if e.Carve.Profile == "1g.10gb+me" || e.Carve.Profile == "7g.80gb" {
				wantUse["ofa"] = 1
			}
			if !mapsEqual(got, wantUse) {
				t.Errorf("%s consumes %v, want %v", d.Name, got, wantUse)
			}
			if d.Attributes["uuid"].StringValue != nil {
				t.Errorf("uncarved placement %s publishes a uuid", d.Name)
			}
			if *d.Attributes["parentUUID"].StringValue != e.GPU.UUID {
				t.Errorf("%s parentUUID %s, want %s", d.Name, *d.Attributes["parentUUID"].StringValue, e.GPU.UUID)
			}
		}
	}
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestDynamicEveryProfileFitsAsTheTableSays fills an empty DGX H100 with one
// profile at a time: each GPU takes exactly the vendor's instance count, at
// the vendor's placements.
func TestDynamicEveryProfileFitsAsTheTableSays(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	for profile, perGPU := range h100Instances {
		t.Run(profile, func(t *testing.T) {
			c, res := dynamicCluster(t, "dgx-h100")
			starts := map[string][]int{}
			n := 0
			for ; ; n++ {
				got, err := c.Allocate(ctx, "dgx-h100", migClaim(fmt.Sprint("c", n), profile))
				if err != nil {
					t.Fatal(err)
				}
				if got == nil {
					break
				}
				e := res.Devices[got[0].Devices.Results[0].Device]
				if e.Carve == nil || e.Carve.Profile != profile {
					t.Fatalf("claim for %s got %s", profile, e.Name)
				}
				starts[e.GPU.UUID] = append(starts[e.GPU.UUID], e.Carve.Placement.Start)
			}
			if n != 8*perGPU {
				t.Fatalf("%d claims fit, want %d per GPU x 8", n, perGPU)
			}
			table := profileOf(t, res, profile)
			for gpu, s := range starts {
				slices.Sort(s)
				if len(s) != perGPU {
					t.Errorf("GPU %s holds %d, want %d", gpu, len(s), perGPU)
				}
				for _, st := range s {
					if !slices.Contains(table.Placements, inventory.Placement{Start: st, Size: table.MemorySlices}) {
						t.Errorf("GPU %s: %s at %d is not a vendor placement", gpu, profile, st)
					}
				}
			}
			if profile == "1g.10gb" {
				for gpu, s := range starts {
					if !slices.Equal(s, []int{0, 1, 2, 3, 4, 5, 6}) {
						t.Errorf("GPU %s: 1g.10gb at %v, want slices 0-6", gpu, s)
					}
				}
			}
			// The node is full for this profile, and so for a whole GPU.
			if got, _ := c.Allocate(ctx, "dgx-h100", wholeClaim("whole")); got != nil {
				t.Errorf("a whole GPU was allocated next to full %s partitions: %v", profile, alloctest.Devices(got[0]))
			}
		})
	}
}

func profileOf(t *testing.T, res *publish.Result, name string) inventory.PartitionProfile {
	for _, e := range res.Devices {
		if pr := e.GPU.Partitioning.Profile(name); pr != nil {
			return *pr
		}
	}
	t.Fatalf("no profile %s", name)
	return inventory.PartitionProfile{}
}

// TestDynamicWholeAndPartitionsExclude: a GPU with any partition is not
// whole, and a whole GPU takes no partition.
func TestDynamicWholeAndPartitionsExclude(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c, _ := dynamicCluster(t, "dgx-h100")
	got, err := c.Allocate(ctx, "dgx-h100", migClaim("small", "1g.10gb"))
	if err != nil || got == nil {
		t.Fatalf("1g.10gb: %v, %v", got, err)
	}
	small := alloctest.Devices(got[0])[0]
	if small != "gpu-7-mig-1g-10gb-5" {
		t.Errorf("first 1g.10gb took %s, want gpu-7-mig-1g-10gb-5 (last GPU, slice 5)", small)
	}
	if got, _ := c.Allocate(ctx, "dgx-h100", alloctest.Claim("eight", req("nvidia.gpu.tessera.dev", 8))); got != nil {
		t.Fatalf("8 whole GPUs allocated while one holds a partition: %v", alloctest.Devices(got[0]))
	}
	got, err = c.Allocate(ctx, "dgx-h100", alloctest.Claim("seven", req("nvidia.gpu.tessera.dev", 7)))
	if err != nil || got == nil {
		t.Fatalf("7 whole GPUs: %v, %v", got, err)
	}
	if slices.Contains(alloctest.Devices(got[0]), "gpu-7") {
		t.Errorf("whole GPUs %v include gpu-7, which holds %s", alloctest.Devices(got[0]), small)
	}
	// gpu-7 has 6 more 1g.10gb in it, nothing else has room.
	for i := 0; i < 6; i++ {
		if got, _ := c.Allocate(ctx, "dgx-h100", migClaim(fmt.Sprint("more", i), "1g.10gb")); got == nil {
			t.Fatalf("1g.10gb %d did not fit on gpu-7", i+2)
		}
	}
	if got, _ := c.Allocate(ctx, "dgx-h100", migClaim("over", "1g.10gb")); got != nil {
		t.Fatalf("an 8th 1g.10gb fit: %v", alloctest.Devices(got[0]))
	}

	c, _ = dynamicCluster(t, "dgx-h100")
	if got, _ := c.Allocate(ctx, "dgx-h100", alloctest.Claim("all", req("nvidia.gpu.tessera.dev", 8))); got == nil {
		t.Fatal("8 whole GPUs did not fit an empty node")
	}
	for profile := range h100Instances {
		if got, _ := c.Allocate(ctx, "dgx-h100", migClaim("p", profile)); got != nil {
			t.Errorf("%s fit a node whose GPUs are all allocated whole: %v", profile, alloctest.Devices(got[0]))
		}
	}
}

// TestDynamicPackingSequence: a mixed sequence lands as the order promises:
// one GPU filled before the next, big placements kept free.
func TestDynamicPackingSequence(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c, _ := dynamicCluster(t, "dgx-h100")
	steps := []struct{ profile, want string }{
		{"3g.40gb", "gpu-7-mig-3g-40gb-4"}, // slice 4 first: 4g.40gb at 0 stays possible
		{"4g.40gb", "gpu-7-mig-4g-40gb-0"}, // 3g + 4g = the whole GPU, as NVIDIA documents
		{"1g.10gb", "gpu-6-mig-1g-10gb-5"}, // gpu-7 is full; next GPU, slice 5 (6 would strand 7)
		{"2g.20gb", "gpu-6-mig-2g-20gb-2"}, // 4 is blocked by the 1g.10gb
		{"3g.40gb", "gpu-5-mig-3g-40gb-4"}, // nothing 4 wide is left on gpu-6
		{"1g.10gb", "gpu-6-mig-1g-10gb-4"}, // back to the fuller GPU
		{"1g.20gb", "gpu-6-mig-1g-20gb-6"},
		{"1g.10gb+me", "gpu-6-mig-1g-10gb-me-1"},
		{"1g.10gb+me", "gpu-5-mig-1g-10gb-me-3"}, // one OFA per GPU
	}
	for i, s := range steps {
		got, err := c.Allocate(ctx, "dgx-h100", migClaim(fmt.Sprint("s", i), s.profile))
		if err != nil || got == nil {
			t.Fatalf("step %d (%s): %v, %v", i, s.profile, got, err)
		}
		if d := alloctest.Devices(got[0])[0]; d != s.want {
			t.Errorf("step %d: %s took %s, want %s", i, s.profile, d, s.want)
		}
	}
}

// TestDynamicAllocatorAgreesWithHardwareRules runs random arrivals and
// departures through the real allocator and carves every allocation on the
// simulated GPUs, which apply NVIDIA's placement rules: every allocation must
// carve, and every refusal must be one the hardware would make too.
func TestDynamicAllocatorAgreesWithHardwareRules(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c, res := dynamicCluster(t, "dgx-h100")
	hw := migBackend(t, ctx, "dgx-h100")
	profiles := []string{"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "whole"}
	type live struct {
		alloc resourceapi.AllocationResult
		entry publish.Entry
		part  string
	}
	var held []live
	wholeHeld := map[string]bool{}
	rng := rand.New(rand.NewSource(5))
	placed, refused := 0, 0
	for step := 0; step < 600; step++ {
		if len(held) > 0 && rng.Intn(5) < 2 {
			k := rng.Intn(len(held))
			l := held[k]
			c.Release(l.alloc)
			if l.part != "" {
				if err := hw.DestroyPartition(ctx, l.entry.GPU.UUID, l.part); err != nil {
					t.Fatal(err)
				}
			} else {
				delete(wholeHeld, l.entry.GPU.UUID)
			}
			held = slices.Delete(held, k, k+1)
			continue
		}
		profile := profiles[rng.Intn(len(profiles))]
		claim := wholeClaim(fmt.Sprint("c", step))
		if profile != "whole" {
			claim = migClaim(fmt.Sprint("c", step), profile)
		}
		got, err := c.Allocate(ctx, "dgx-h100", claim)
		if err != nil {
			t.Fatal(err)
		}
		if got == nil {
			refused++
			if where := hardwareFit(t, ctx, hw, profile, wholeHeld); where != "" {
				t.Fatalf("step %d: allocator refused %s, but the hardware takes it on %s", step, profile, where)
			}
			continue
		}
		placed++
		e := res.Devices[got[0].Devices.Results[0].Device]
		l := live{alloc: got[0], entry: e}
		if e.Carve == nil {
			inv, _ := hw.Discover(ctx)
			for _, g := range inv.GPUs {
				if g.UUID == e.GPU.UUID && len(g.Partitions) > 0 {
					t.Fatalf("step %d: whole GPU %s allocated while it holds %d partitions", step, e.Name, len(g.Partitions))
				}
			}
			if wholeHeld[e.GPU.UUID] {
				t.Fatalf("step %d: whole GPU %s allocated twice", step, e.Name)
			}
			wholeHeld[e.GPU.UUID] = true
		} else {
			if wholeHeld[e.GPU.UUID] {
				t.Fatalf("step %d: %s allocated on a GPU allocated whole", step, e.Name)
			}
			p, err := hw.CreatePartition(ctx, e.GPU.UUID, e.Carve.Profile, e.Carve.Placement)
			if err != nil {
				t.Fatalf("step %d: allocator chose %s, the hardware refuses it: %v", step, e.Name, err)
			}
			l.part = p.UUID
		}
		held = append(held, l)
	}
	if placed < 100 || refused < 50 {
		t.Errorf("placed %d, refused %d: the sequence did not exercise both outcomes", placed, refused)
	}
}

// migBackend is a simulated machine with MIG mode on everywhere, as dynamic
// partitioning turns it on at the first carve.
func migBackend(t *testing.T, ctx context.Context, machine string) *sim.Backend {
	m, err := sim.Profile(machine, machine)
	if err != nil {
		t.Fatal(err)
	}
	b := alloctest.NewSim(t, m)
	inv, _ := b.Discover(ctx)
	for _, g := range inv.GPUs {
		for _, p := range g.Partitions {
			if err := b.DestroyPartition(ctx, g.UUID, p.UUID); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.SetPartitionMode(ctx, g.UUID, true); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// hardwareFit tries profile at every placement of every GPU not held whole
// and returns where it carved ("" for nowhere), destroying it again.
func hardwareFit(t *testing.T, ctx context.Context, hw *sim.Backend, profile string, wholeHeld map[string]bool) string {
	inv, _ := hw.Discover(ctx)
	for _, g := range inv.GPUs {
		if wholeHeld[g.UUID] {
			continue
		}
		if profile == "whole" {
			if len(g.Partitions) == 0 {
				return g.UUID
			}
			continue
		}
		for _, pr := range g.Partitioning.Profiles {
			if pr.Name != profile {
				continue
			}
			for _, pl := range pr.Placements {
				if p, err := hw.CreatePartition(ctx, g.UUID, profile, pl); err == nil {
					if err := hw.DestroyPartition(ctx, g.UUID, p.UUID); err != nil {
						t.Fatal(err)
					}
					return fmt.Sprintf("%s at %d", g.UUID, pl.Start)
				}
			}
		}
	}
	return ""
}

// TestDynamicPublishesByMode: GPUs whose MIG mode needs a reset to change
// publish what their mode allows; other vendors stay static.
func TestDynamicPublishesByMode(t *testing.T) {
	m, err := sim.Profile("dgx-a100", "n")
	if err != nil {
		t.Fatal(err)
	}
	inv := m.Node.Clone()
	res, err := publish.Build("n", inv, dynamic)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Devices {
		if e.Carve != nil {
			t.Fatalf("A100 with MIG off published placement %s", e.Name)
		}
	}
	if res.Modes[0].Mode != "whole" || res.Modes[0].Reason == "" {
		t.Errorf("A100 MIG off: mode %+v, want whole with a reason", res.Modes[0])
	}
	for i := range inv.GPUs {
		inv.GPUs[i].Partitioning.Enabled = true
	}
	res, err = publish.Build("n", inv, dynamic)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Devices {
		if e.Carve == nil {
			t.Fatalf("A100 with MIG on published whole GPU %s", e.Name)
		}
	}
	if len(res.Devices) != 8*len(placementsOf(inv.GPUs[0].Partitioning)) {
		t.Errorf("%d devices, want every placement of 8 GPUs", len(res.Devices))
	}
	if res.Modes[0].Mode != "dynamic" || res.Modes[0].Reason == "" {
		t.Errorf("A100 MIG on: mode %+v, want dynamic with a reason", res.Modes[0])
	}

	// AMD compute partitions are a mode of the whole GPU: a dynamic GPU
	// publishes its whole device (SPX) and the partitions of every other
	// mode, never an SPX placement of its own.
	_, res = alloctest.PublishSimWith(t, "mi300x-8", "n", dynamic)
	placed := map[string]int{}
	for _, e := range res.Devices {
		if e.Carve != nil {
			placed[e.Carve.Profile]++
		}
	}
	if placed["SPX"] != 0 || placed["DPX"] == 0 || placed["QPX"] != 2*placed["DPX"] || placed["CPX"] != 4*placed["DPX"] {
		t.Errorf("MI300X placements by mode %v, want DPX, QPX and CPX in 1:2:4 and no SPX", placed)
	}
	for _, m := range res.Modes {
		if m.Mode != "dynamic" {
			t.Errorf("MI300X GPU %s: mode %+v, want dynamic", m.UUID, m)
		}
	}
}

func placementsOf(pt *inventory.Partitioning) []inventory.Placement {
	var out []inventory.Placement
	for _, p := range pt.Profiles {
		out = append(out, p.Placements...)
	}
	return out
}

// TestDynamicEveryMIGTableFits: on every catalogue machine with MIG GPUs
// (A100 40GB and 80GB, H100, H200, with their +me and 1g.Ngb profiles), a
// GPU takes through the real allocator exactly as many partitions of each
// profile as the simulated hardware lets one carve, and every allocation
// carves. MIG mode is turned on in the inventory first, so reset-class GPUs
// publish their placements too.
func TestDynamicEveryMIGTableFits(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	classes, err := alloctest.Classes()
	if err != nil {
		t.Fatal(err)
	}
	tested := map[string]bool{}
	for _, machine := range sim.CatalogNames() {
		m, err := sim.Profile(machine, machine)
		if err != nil {
			t.Fatal(err)
		}
		gi := -1
		for i := range m.Node.GPUs {
			g := &m.Node.GPUs[i]
			g.Partitions = nil
			if pt := g.Partitioning; pt != nil && pt.Kind == inventory.PartitionMIG {
				pt.Enabled = true
				if gi < 0 && !tested[g.ProductName] {
					gi = i
				}
			}
		}
		if gi < 0 {
			continue
		}
		g := m.Node.GPUs[gi]
		tested[g.ProductName] = true
		t.Run(machine+"/"+g.ProductName, func(t *testing.T) {
			res, err := publish.Build(machine, m.Node.Clone(), dynamic)
			if err != nil {
				t.Fatal(err)
			}
			for _, pr := range g.Partitioning.Profiles {
				hw := alloctest.NewSim(t, m)
				want := 0
				for _, pl := range pr.Placements {
					if _, err := hw.CreatePartition(ctx, g.UUID, pr.Name, pl); err == nil {
						want++
					}
				}
				// A second, empty GPU carves what the allocator hands out.
				hw = alloctest.NewSim(t, m)
				c := alloctest.NewCluster(publish.Objects(driver, machine, res.Resources), classes)
				n := 0
				for ; ; n++ {
					claim := alloctest.Claim(fmt.Sprint("c", n), req("mig.gpu.tessera.dev", 1,
						fmt.Sprintf(profileIs, pr.Name), fmt.Sprintf(`device.attributes["gpu.tessera.dev"].parentUUID == %q`, g.UUID)))
					got, err := c.Allocate(ctx, machine, claim)
					if err != nil {
						t.Fatal(err)
					}
					if got == nil {
						break
					}
					e := res.Devices[got[0].Devices.Results[0].Device]
					if _, err := hw.CreatePartition(ctx, g.UUID, pr.Name, e.Carve.Placement); err != nil {
						t.Fatalf("%s: allocation %d (%s) does not carve: %v", pr.Name, n+1, e.Name, err)
					}
				}
				if n != want {
					t.Errorf("%s: %d fit through the allocator, the hardware takes %d", pr.Name, n, want)
				}
			}
		})
	}
	for _, want := range []string{"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"} {
		if !tested[want] {
			t.Errorf("no catalogue machine has a %s", want)
		}
	}
	t.Logf("MIG tables checked: %v", tested)
}

// TestDynamicMoreThanEightGPUs: counter sets spill into a second counter
// slice past 8 GPUs, and every device still finds its set in the pool.
func TestDynamicMoreThanEightGPUs(t *testing.T) {
	m, err := sim.Profile("dgx-h100", "n")
	if err != nil {
		t.Fatal(err)
	}
	inv := m.Node.Clone()
	for i := 0; i < 4; i++ {
		g := inv.GPUs[i].Clone()
		g.UUID = fmt.Sprintf("GPU-extra-%d", i)
		g.PCIBusID = fmt.Sprintf("0001:%02x:00.0", i+1)
		inv.GPUs = append(inv.GPUs, g)
	}
	res, err := publish.Build("n", inv, dynamic)
	if err != nil {
		t.Fatal(err)
	}
	objs := publish.Objects(driver, "n", res.Resources)
	sets := map[string]bool{}
	var counterSlices []int
	for _, s := range objs {
		if len(s.Spec.SharedCounters) > 0 {
			counterSlices = append(counterSlices, len(s.Spec.SharedCounters))
		}
		for _, cs := range s.Spec.SharedCounters {
			sets[cs.Name] = true
		}
	}
	if !slices.Equal(counterSlices, []int{8, 4}) {
		t.Errorf("counter slices hold %v sets, want [8 4]", counterSlices)
	}
	for _, s := range objs {
		for _, d := range s.Spec.Devices {
			if !sets[d.ConsumesCounters[0].CounterSet] {
				t.Fatalf("device %s consumes from missing set %s", d.Name, d.ConsumesCounters[0].CounterSet)
			}
		}
	}
	classes, err := alloctest.Classes()
	if err != nil {
		t.Fatal(err)
	}
	_, ctx := ktesting.NewTestContext(t)
	c := alloctest.NewCluster(objs, classes)
	if got, err := c.Allocate(ctx, "n", alloctest.Claim("all", req("nvidia.gpu.tessera.dev", 12))); err != nil || got == nil {
		t.Fatalf("12 whole GPUs: %v, %v", got, err)
	}
}
