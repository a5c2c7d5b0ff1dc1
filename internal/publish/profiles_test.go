package publish_test

import (
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
)

// TestDynamicProfilesRestrict: with Options.Profiles a dynamic GPU
// publishes the placements of those profiles only (and the whole GPU), a
// claim for another profile fits nowhere, the listed ones still pack; a
// partition that exists at a placement of an unlisted profile stays
// published, so the claim that holds it keeps its device.
func TestDynamicProfilesRestrict(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	only := []string{"1g.10gb", "3g.40gb", "7g.80gb"}
	opts := publish.Options{Partitioning: publish.Dynamic, Profiles: only}
	objs, res := alloctest.PublishSimWith(t, "dgx-h100", "n", opts)
	_, all := alloctest.PublishSimWith(t, "dgx-h100", "n", publish.Options{Partitioning: publish.Dynamic})
	for name, e := range res.Devices {
		if e.Carve != nil && !strings.Contains(strings.Join(only, " "), e.Carve.Profile) {
			t.Errorf("placement %s of unlisted profile %s published", name, e.Carve.Profile)
		}
	}
	// Per GPU: whole + 7 (1g.10gb) + 2 (3g.40gb) + 1 (7g.80gb).
	if got, want := len(res.Devices), 8*11; got != want {
		t.Errorf("%d devices, want %d (of %d unrestricted)", got, want, len(all.Devices))
	}
	classes, err := alloctest.Classes()
	if err != nil {
		t.Fatal(err)
	}
	c := alloctest.NewCluster(objs, classes)
	if r, err := c.Allocate(ctx, "n", migClaim("two", "2g.20gb")); err != nil || r != nil {
		t.Fatalf("2g.20gb: %v %v, want no fit", r, err)
	}
	for i, p := range []string{"3g.40gb", "1g.10gb", "1g.10gb", "1g.10gb"} {
		if r, err := c.Allocate(ctx, "n", migClaim(p+string(rune('a'+i)), p)); err != nil || r == nil {
			t.Fatalf("%s: %v %v", p, r, err)
		}
	}

	// A 2g.20gb cut before the restriction (a claim holds it) stays.
	m, err := sim.Profile("dgx-h100", "n")
	if err != nil {
		t.Fatal(err)
	}
	inv := m.Node.Clone()
	g := &inv.GPUs[0]
	g.Partitioning.Enabled = true
	g.Partitions = append(g.Partitions, inventory.Partition{Kind: inventory.PartitionMIG, Profile: "2g.20gb", Placement: inventory.Placement{Start: 0, Size: 2}, UUID: "MIG-held"})
	res2, err := publish.Build("n", inv, opts)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range res2.Devices {
		found = found || (e.Partition != nil && e.Partition.UUID == "MIG-held")
	}
	if !found {
		t.Error("the held 2g.20gb partition's placement is not published")
	}
}
