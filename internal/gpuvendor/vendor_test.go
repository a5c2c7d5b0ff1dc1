package gpuvendor

import (
	"slices"
	"testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

func TestDeviceUUID(t *testing.T) {
	g := &inventory.GPU{UUID: "GPU-a"}
	for _, tc := range []struct {
		d    Device
		want string
	}{
		{Device{GPU: g}, "GPU-a"},
		{Device{GPU: g, Partition: &inventory.Partition{UUID: "MIG-b"}}, "MIG-b"},
	} {
		if got := tc.d.UUID(); got != tc.want {
			t.Errorf("UUID() = %q, want %q", got, tc.want)
		}
	}
}

func TestPathsAndCheckMinor(t *testing.T) {
	if got := Paths([]Node{{Path: "a"}, {Path: "b/c"}}); !slices.Equal(got, []string{"a", "b/c"}) {
		t.Errorf("Paths = %v", got)
	}
	for _, tc := range []struct {
		n    int
		want string
	}{{0, ""}, {255, ""}, {-1, "card minor -1 is negative"}} {
		got := ""
		if err := CheckMinor("card minor", tc.n); err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("CheckMinor(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
