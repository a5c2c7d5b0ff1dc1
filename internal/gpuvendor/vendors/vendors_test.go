package vendors

import (
	"testing"

	"github.com/tessera-gpu/tessera/internal/gpuvendor"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

func TestFor(t *testing.T) {
	for _, tc := range []struct {
		name inventory.Vendor
		ok   bool
	}{{inventory.VendorNVIDIA, true}, {inventory.VendorAMD, true}, {"intel", false}, {"", false}} {
		v, ok := For(tc.name)
		if ok != tc.ok || ok && v.Name() != tc.name {
			t.Errorf("For(%q) = %v, %v", tc.name, v, ok)
		}
	}
	if got := Capabilities("intel"); got != (gpuvendor.Capabilities{}) {
		t.Errorf("an unknown vendor can do %+v", got)
	}
	if !Capabilities(inventory.VendorNVIDIA).MPS {
		t.Error("Capabilities does not answer for NVIDIA")
	}
}

// The simulator numbers majors by their position over All: names and
// regions must be unique, and the order is the one it documents.
func TestAllUnique(t *testing.T) {
	names, majors := map[inventory.Vendor]bool{}, map[string]bool{}
	var order []string
	for _, v := range All() {
		if names[v.Name()] {
			t.Errorf("vendor %s listed twice", v.Name())
		}
		names[v.Name()] = true
		for _, m := range v.Majors() {
			if majors[m] {
				t.Errorf("major %s of %s is another vendor's", m, v.Name())
			}
			majors[m] = true
			order = append(order, m)
		}
	}
	want := []string{"nvidia-frontend", "nvidia-uvm", "nvidia-caps", "drm", "kfd"}
	if len(order) != len(want) {
		t.Fatalf("majors %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Errorf("majors %v, want %v", order, want)
		}
	}
}
