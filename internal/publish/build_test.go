package publish

import (
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

func gpu(bus string, mem int64, numa int) inventory.GPU {
	return inventory.GPU{Vendor: inventory.VendorNVIDIA, Model: "X", UUID: "GPU-" + bus, PCIBusID: bus, MemoryBytes: mem, ComputeUnits: 10, NUMANode: numa, DriverVersion: "580.65.06"}
}

func TestNamesFollowBusOrderNotEnumeration(t *testing.T) {
	n := &inventory.Node{GPUs: []inventory.GPU{gpu("0000:db:00.0", 1, 1), gpu("0000:18:00.0", 1, 0), gpu("0001:05:00.0", 1, 0), gpu("0000:9a:00.0", 1, 1)}}
	want := map[string]string{"0000:18:00.0": "gpu-0", "0000:9a:00.0": "gpu-1", "0000:db:00.0": "gpu-2", "0001:05:00.0": "gpu-3"}
	for trial := 0; trial < 5; trial++ {
		rand.New(rand.NewSource(int64(trial))).Shuffle(len(n.GPUs), func(i, j int) { n.GPUs[i], n.GPUs[j] = n.GPUs[j], n.GPUs[i] })
		res, err := Build("n", n, Options{Partitioning: Static})
		if err != nil {
			t.Fatal(err)
		}
		for name, e := range res.Devices {
			if want[e.GPU.PCIBusID] != name {
				t.Errorf("trial %d: %s named %s, want %s", trial, e.GPU.PCIBusID, name, want[e.GPU.PCIBusID])
			}
		}
	}
}

func TestOrderSmallestFirstThenNUMA(t *testing.T) {
	n := &inventory.Node{GPUs: []inventory.GPU{
		gpu("0000:01:00.0", 80, 1), gpu("0000:02:00.0", 16, 1), gpu("0000:03:00.0", 80, 0), gpu("0000:04:00.0", 16, 0),
	}}
	res, err := Build("n", n, Options{Partitioning: Static})
	if err != nil {
		t.Fatal(err)
	}
	// 16s before 80s; within a size, NUMA 0 first.
	want := []string{"gpu-3", "gpu-1", "gpu-2", "gpu-0"}
	if !reflect.DeepEqual(res.Order, want) {
		t.Errorf("order %v, want %v", res.Order, want)
	}
}

func TestSplitsIntoSlicesWithinLimits(t *testing.T) {
	prof := inventory.PartitionProfile{Name: "1g.10gb", MemoryBytes: 10, ComputeUnits: 16, MemorySlices: 1, Placements: []inventory.Placement{{Start: 0, Size: 1}}}
	n := &inventory.Node{}
	for i := 0; i < 24; i++ {
		g := gpu(fmt.Sprintf("0000:%02x:00.0", i+1), 80, 0)
		if i >= 4 {
			g.Partitioning = &inventory.Partitioning{Kind: inventory.PartitionMIG, Enabled: true, MemorySlices: 8, Profiles: []inventory.PartitionProfile{prof}}
			for s := 0; s < 7; s++ {
				g.Partitions = append(g.Partitions, inventory.Partition{Kind: inventory.PartitionMIG, Profile: "1g.10gb", Placement: inventory.Placement{Start: s, Size: 1}, UUID: fmt.Sprintf("MIG-%d-%d", i, s), MemoryBytes: 10})
			}
		}
		n.GPUs = append(n.GPUs, g)
	}
	res, err := Build("n", n, Options{Partitioning: Static})
	if err != nil {
		t.Fatal(err)
	}
	pool := res.Resources.Pools["n"]
	total := 4 + 20*7
	if len(pool.Slices) != (total+MaxDevicesPerSlice-1)/MaxDevicesPerSlice {
		t.Fatalf("%d slices for %d devices", len(pool.Slices), total)
	}
	var flat []string
	for _, s := range pool.Slices {
		if len(s.Devices) > MaxDevicesPerSlice {
			t.Errorf("slice with %d devices", len(s.Devices))
		}
		for _, d := range s.Devices {
			flat = append(flat, d.Name)
		}
	}
	if !reflect.DeepEqual(flat, res.Order) {
		t.Error("slices do not keep the publishing order")
	}
	if !strings.HasPrefix(flat[4], "gpu-4-mig-1g-10gb-0") {
		t.Errorf("first partition %s, want whole GPUs first then gpu-4's slices", flat[4])
	}
	objs := Objects("gpu.tessera.dev", "n", res.Resources)
	for i, o := range objs {
		if want := fmt.Sprintf("%05x-gpu.tessera.dev-n-", i); o.GenerateName != want {
			t.Errorf("slice %d generateName %q, want %q", i, o.GenerateName, want)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	bad := gpu("0000:zz:00.0", 1, 0)
	dupA, dupB := gpu("0000:01:00.0", 1, 0), gpu("0000:01:00.0", 1, 0)
	dupB.UUID = "other"
	badVersion := gpu("0000:02:00.0", 1, 0)
	badVersion.DriverVersion = "r580"
	for name, n := range map[string]*inventory.Node{
		"bad bus id":     {GPUs: []inventory.GPU{bad}},
		"duplicate bus":  {GPUs: []inventory.GPU{dupA, dupB}},
		"bad version":    {GPUs: []inventory.GPU{badVersion}},
		"link off range": {GPUs: []inventory.GPU{dupA}, Links: []inventory.Link{{Kind: inventory.LinkNVLink, A: 0, B: 3}}},
	} {
		if _, err := Build("n", n, Options{Partitioning: Static}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestSemver(t *testing.T) {
	for in, want := range map[string]string{"9.0": "9.0.0", "580.65.06": "580.65.6", "6.12.12": "6.12.12", "9": "9.0.0", "00.1": "0.1.0"} {
		if got, err := Semver(in); err != nil || got != want {
			t.Errorf("Semver(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "1.2.3.4", "r580", "1..2"} {
		if _, err := Semver(bad); err == nil && bad != "" {
			t.Errorf("Semver(%q): no error", bad)
		}
	}
}

func TestEmptyNodePublishesAnEmptySlice(t *testing.T) {
	res, err := Build("n", &inventory.Node{}, Options{Partitioning: Static})
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Resources.Pools["n"].Slices; len(s) != 1 || len(s[0].Devices) != 0 {
		t.Errorf("slices %+v", s)
	}
}
