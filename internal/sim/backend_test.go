package sim

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

var migUUIDRE = regexp.MustCompile(`^MIG-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

type carve struct {
	profile string
	start   int
	wantErr string // "" = must succeed
}

// TestCarving replays sequences of CreatePartition calls on a fresh H100
// with MIG enabled.
func TestCarving(t *testing.T) {
	cases := []struct {
		name  string
		steps []carve
	}{
		{"seven 1g.10gb fit, an eighth does not", []carve{
			{"1g.10gb", 0, ""}, {"1g.10gb", 1, ""}, {"1g.10gb", 2, ""}, {"1g.10gb", 3, ""},
			{"1g.10gb", 4, ""}, {"1g.10gb", 5, ""}, {"1g.10gb", 6, ""},
			{"1g.10gb", 7, "cannot be placed at 7 (valid starts: {0,1,2,3,4,5,6})"},
			{"1g.10gb", 3, "overlaps partition MIG-"},
		}},
		{"3g.40gb at 0 then 4g.40gb at 0 overlaps", []carve{
			{"3g.40gb", 0, ""}, {"4g.40gb", 0, "profile 4g.40gb at 0:4 overlaps partition MIG-"},
		}},
		{"two 3g.40gb fit", []carve{{"3g.40gb", 0, ""}, {"3g.40gb", 4, ""}, {"1g.10gb", 6, "overlaps"}}},
		{"4g + 3g use all compute slices", []carve{{"4g.40gb", 0, ""}, {"3g.40gb", 4, ""}}},
		{"compute slices run out before memory", []carve{
			{"2g.20gb", 0, ""}, {"2g.20gb", 2, ""}, {"2g.20gb", 4, ""}, {"1g.10gb", 6, ""},
		}},
		{"1g.20gb takes two slices", []carve{{"1g.20gb", 0, ""}, {"1g.10gb", 1, "overlaps"}, {"1g.20gb", 1, "cannot be placed at 1"}}},
		{"one +me per GPU", []carve{{"1g.10gb+me", 0, ""}, {"1g.10gb+me", 1, "allows 1 instance(s) per GPU and 1 exist"}}},
		{"7g.80gb is the whole GPU", []carve{{"7g.80gb", 0, ""}, {"1g.10gb", 6, "overlaps"}}},
		{"unknown profile", []carve{{"5g.50gb", 0, `has no partition profile "5g.50gb" (it has: 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)`}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := newBackend(t, enableAll(mustProfile(t, "dgx-h100")))
			gpu := b.machine.Node.GPUs[0].UUID
			for i, s := range tc.steps {
				p, err := b.CreatePartition(context.Background(), gpu, s.profile, inventory.Placement{Start: s.start})
				if s.wantErr == "" {
					if err != nil {
						t.Fatalf("step %d (%s at %d): %v", i, s.profile, s.start, err)
					}
					if p.Profile != s.profile || p.Placement.Start != s.start || !migUUIDRE.MatchString(p.UUID) {
						t.Fatalf("step %d: got %+v", i, p)
					}
					continue
				}
				if err == nil || !strings.Contains(err.Error(), s.wantErr) {
					t.Fatalf("step %d (%s at %d): error %v, want it to contain %q", i, s.profile, s.start, err, s.wantErr)
				}
				if !strings.Contains(err.Error(), gpu) {
					t.Errorf("step %d: error does not name the GPU: %v", i, err)
				}
			}
			// A failed step changes nothing.
			want := 0
			for _, s := range tc.steps {
				if s.wantErr == "" {
					want++
				}
			}
			if got := len(discover(t, b).GPUs[0].Partitions); got != want {
				t.Errorf("%d partitions, want %d", got, want)
			}
		})
	}
}

func TestCreateDestroy(t *testing.T) {
	ctx := context.Background()
	b, _ := newBackend(t, enableAll(mustProfile(t, "dgx-h100")))
	gpu := b.machine.Node.GPUs[2].UUID

	p3, err := b.CreatePartition(ctx, gpu, "3g.40gb", inventory.Placement{Start: 4, Size: 4})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := b.CreatePartition(ctx, gpu, "2g.20gb", inventory.Placement{Start: 0})
	if err != nil {
		t.Fatal(err)
	}
	p1, err := b.CreatePartition(ctx, gpu, "1g.10gb", inventory.Placement{Start: 3})
	if err != nil {
		t.Fatal(err)
	}
	// GPU instance ids follow the placement, as nvidia-smi shows them.
	if p3.GPUInstanceID != 2 || p2.GPUInstanceID != 3 || p1.GPUInstanceID != 10 || p3.ComputeInstanceID != 0 {
		t.Errorf("GPU instance ids %d %d %d, want 2 3 10", p3.GPUInstanceID, p2.GPUInstanceID, p1.GPUInstanceID)
	}
	if p3.MemoryBytes != 40448*mib || p3.ComputeUnits != 60 || p3.Engines["copyEngines"] != 3 || p3.Kind != inventory.PartitionMIG {
		t.Errorf("3g.40gb filled wrongly: %+v", p3)
	}
	if p3.UUID == p2.UUID || p2.UUID == p1.UUID {
		t.Error("partition UUIDs repeat")
	}
	if _, err := b.CreatePartition(ctx, gpu, "3g.40gb", inventory.Placement{Start: 4, Size: 8}); err == nil || !strings.Contains(err.Error(), "is 4 slices wide, not 8") {
		t.Errorf("a wrong size was accepted: %v", err)
	}

	n := discover(t, b)
	var starts []int
	for _, p := range n.GPUs[2].Partitions {
		starts = append(starts, p.Placement.Start)
	}
	if fmt.Sprint(starts) != "[0 3 4]" {
		t.Errorf("Discover partitions at %v, want sorted [0 3 4]", starts)
	}

	// Destroy frees the slices.
	if _, err := b.CreatePartition(ctx, gpu, "4g.40gb", inventory.Placement{Start: 0}); err == nil {
		t.Fatal("4g.40gb fit over a 2g.20gb")
	}
	if err := b.DestroyPartition(ctx, gpu, p2.UUID); err != nil {
		t.Fatal(err)
	}
	if err := b.DestroyPartition(ctx, gpu, p1.UUID); err != nil {
		t.Fatal(err)
	}
	p4, err := b.CreatePartition(ctx, gpu, "4g.40gb", inventory.Placement{Start: 0})
	if err != nil {
		t.Fatalf("destroy did not free the slices: %v", err)
	}
	if p4.GPUInstanceID != 1 {
		t.Errorf("4g.40gb at 0 got GPU instance %d, want 1", p4.GPUInstanceID)
	}
	// Destroying what does not exist is fine; an unknown GPU is not.
	if err := b.DestroyPartition(ctx, gpu, p2.UUID); err != nil {
		t.Errorf("destroying a gone partition: %v", err)
	}
	if err := b.DestroyPartition(ctx, "GPU-nope", p2.UUID); err == nil {
		t.Error("destroying on an unknown GPU succeeded")
	}
	if _, err := b.CreatePartition(ctx, "GPU-nope", "1g.10gb", inventory.Placement{}); err == nil || !strings.Contains(err.Error(), `no GPU with UUID "GPU-nope"`) {
		t.Errorf("creating on an unknown GPU: %v", err)
	}
}

func TestCreateRefusesDisabledAndUnpartitionable(t *testing.T) {
	ctx := context.Background()
	b, _ := newBackend(t, mustProfile(t, "dgx-h100"))
	_, err := b.CreatePartition(ctx, b.machine.Node.GPUs[0].UUID, "1g.10gb", inventory.Placement{})
	if err == nil || !strings.Contains(err.Error(), "mig partitioning is not enabled") {
		t.Errorf("MIG disabled: %v", err)
	}
	l4, _ := newBackend(t, mustProfile(t, "l4-4"))
	_, err = l4.CreatePartition(ctx, l4.machine.Node.GPUs[0].UUID, "1g.10gb", inventory.Placement{})
	if err == nil || !strings.Contains(err.Error(), "cannot be partitioned") {
		t.Errorf("L4: %v", err)
	}
}

func TestAMDComputePartitions(t *testing.T) {
	ctx := context.Background()
	b, _ := newBackend(t, enableAll(mustProfile(t, "mi300x-8")))
	gpu := b.machine.Node.GPUs[0].UUID
	var made []*inventory.Partition
	for start := 0; start < 3; start++ {
		p, err := b.CreatePartition(ctx, gpu, "CPX", inventory.Placement{Start: start})
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, p)
	}
	// Partition 0 has the GPU's own nodes (card1, renderD128); the others
	// the amdgpu_xcp devices' made for the GPU at probe, after every GPU's
	// own card1-8 / renderD128-135: seven each, GPU 0's first.
	for i, p := range made {
		card, render := 8+i, 135+i
		if i == 0 {
			card, render = 1, 128
		}
		if p.Kind != inventory.PartitionXCP || p.GPUInstanceID != i || p.Minor != card || p.RenderMinor != render || len(p.UUID) != 16 || p.ComputeUnits != 38 {
			t.Errorf("CPX %d: %+v, want card%d renderD%d", i, p, card, render)
		}
	}
	if _, err := b.CreatePartition(ctx, gpu, "DPX", inventory.Placement{Start: 4}); err == nil || !strings.Contains(err.Error(), "compute partition mode is GPU-wide") {
		t.Errorf("mixed modes: %v", err)
	}
	if err := b.DestroyPartition(ctx, gpu, made[1].UUID); err != nil {
		t.Fatal(err)
	}
	p, err := b.CreatePartition(ctx, gpu, "CPX", inventory.Placement{Start: 7})
	if err != nil {
		t.Fatal(err)
	}
	// Each partition index has its nodes, whatever was made or destroyed.
	if p.Minor != 15 || p.RenderMinor != 142 {
		t.Errorf("CPX 7 on card%d renderD%d, want card15 renderD142: %+v", p.Minor, p.RenderMinor, p)
	}
}

func TestDiscoverIsACopy(t *testing.T) {
	b, _ := newBackend(t, mustProfile(t, "dgx-h100-mig"))
	n := discover(t, b)
	if n.GPUs[0].Health.State != inventory.Healthy {
		t.Errorf("health %+v", n.GPUs[0].Health)
	}
	n.GPUs[0].Model = "changed"
	n.GPUs[0].Engines["decoders"] = 99
	n.GPUs[0].Partitioning.Profiles[0].Placements[0].Start = 5
	n.GPUs[6].Partitions[0].UUID = "changed"
	n.GPUs[6].Partitions[0].Engines["decoders"] = 99
	n.Links[0].BandwidthGBps = 1
	again := discover(t, b)
	g0, g6 := again.GPUs[0], again.GPUs[6]
	if g0.Model != "H100" || g0.Engines["decoders"] != 7 || g0.Partitioning.Profiles[0].Placements[0].Start != 0 ||
		g6.Partitions[0].UUID == "changed" || g6.Partitions[0].Engines["decoders"] != 1 || again.Links[0].BandwidthGBps != 450 {
		t.Error("Discover's result aliases the backend's state")
	}
	if b.Name() != "sim" {
		t.Errorf("Name() = %q", b.Name())
	}
}

// TestConcurrentUse is for -race: carving, destroying and reading at once.
func TestConcurrentUse(t *testing.T) {
	ctx := context.Background()
	b, _ := newBackend(t, enableAll(mustProfile(t, "dgx-h100")))
	var wg sync.WaitGroup
	for i, g := range b.machine.Node.GPUs {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for round := 0; round < 5; round++ {
				var made []string
				for s := 0; s < 7; s++ {
					p, err := b.CreatePartition(ctx, g.UUID, "1g.10gb", inventory.Placement{Start: s})
					if err != nil {
						t.Errorf("GPU %d: %v", i, err)
						return
					}
					made = append(made, p.UUID)
				}
				for _, u := range made {
					if err := b.DestroyPartition(ctx, g.UUID, u); err != nil {
						t.Errorf("GPU %d: %v", i, err)
					}
				}
			}
		}()
		go func() {
			defer wg.Done()
			for round := 0; round < 20; round++ {
				if _, err := b.Discover(ctx); err != nil {
					t.Errorf("Discover: %v", err)
				}
				if _, _, ok := b.DeviceNumbers(fmt.Sprintf("nvidia%d", i)); !ok {
					t.Errorf("nvidia%d unknown", i)
				}
			}
		}()
	}
	wg.Wait()
	for _, g := range discover(t, b).GPUs {
		if len(g.Partitions) != 0 {
			t.Errorf("GPU %s left with %d partitions", g.UUID, len(g.Partitions))
		}
	}
}
