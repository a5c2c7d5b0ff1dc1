package cdi

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
)

// vfioNumbers is simNumbers with the VFIO nodes' numbers.
func vfioNumbers(p string) (int64, int64, bool) {
	switch p {
	case "vfio/vfio":
		return 10, 196, true
	case "vfio/40":
		return 242, 3, true
	}
	return simNumbers(p)
}

// TestPassedGPU: a GPU passed through gets its group's node and the VFIO
// container's from the effect's edits, none of its vendor's nodes, and no
// place in the vendor's common device, which still serves the claim's
// other GPU; the CDI library resolves it as a runtime would, and the spec
// records the passthrough for a checkpoint rebuilt from it.
func TestPassedGPU(t *testing.T) {
	w, dir := newTestWriter(t, vfioNumbers)
	passed := dev(0, nvidiaGPU(0), nil)
	passed.Request = "vm"
	passed.VFIO = &checkpoint.VFIO{Group: 40, Bound: true, Functions: []checkpoint.VFIOFunction{{Address: "0000:41:00.0", Driver: "nvidia"}}}
	passed.Edits = Edits{Nodes: []string{"vfio/40"}}
	other := dev(1, nvidiaGPU(1), nil)
	vfioLevel := ClaimLevel{Name: "vfio", Joins: func(d *ClaimDevice) bool { return d.VFIO != nil },
		Edits: func([]ClaimDevice) (Edits, error) { return Edits{Nodes: []string{"vfio/vfio"}}, nil }}
	claim := ClaimRef{UID: uidA, Namespace: "vms", Name: "guest"}
	ids, err := w.WriteClaim(ClaimSpec{Claim: claim, Devices: []ClaimDevice{passed, other}, Shared: []ClaimLevel{vfioLevel}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[0] {
		if strings.Contains(id, "common") {
			t.Errorf("the passed GPU names its vendor's common device: %v", ids[0])
		}
	}

	spec, err := inject(t, dir, ids[0]...)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := nodeStrings(devicesOf(t, spec)), []string{"/dev/vfio/40 c 242:3", "/dev/vfio/vfio c 10:196"}; !slices.Equal(got, want) {
		t.Errorf("the passed GPU's container gets %v, want %v", got, want)
	}
	if env := envOf(spec); len(env) != 0 {
		t.Errorf("the passed GPU's container gets environment %v, want none (NVIDIA_VISIBLE_DEVICES would name a GPU no driver holds)", env)
	}

	whole, err := inject(t, dir, flatten(ids)...)
	if err != nil {
		t.Fatal(err)
	}
	if got := envOf(whole); !slices.Equal(got, []string{"NVIDIA_VISIBLE_DEVICES=" + other.GPU.UUID}) {
		t.Errorf("the whole claim's environment %v, want only the other GPU", got)
	}
	if got := nodeStrings(devicesOf(t, whole)); !slices.Contains(got, "/dev/nvidia1 c 195:1") || slices.Contains(got, "/dev/nvidia0 c 195:0") {
		t.Errorf("the whole claim's nodes %v: want nvidia1 and not the passed GPU's nvidia0", got)
	}

	recs, err := w.ListClaimSpecs()
	if err != nil || len(recs) != 1 {
		t.Fatalf("ListClaimSpecs = %+v, %v", recs, err)
	}
	if got := recs[0].Devices[0].VFIO; !reflect.DeepEqual(got, passed.VFIO) {
		t.Errorf("the spec records %+v, want %+v", got, passed.VFIO)
	}
	if recs[0].Devices[1].VFIO != nil {
		t.Errorf("the other GPU recorded as passed: %+v", recs[0].Devices[1].VFIO)
	}
}
