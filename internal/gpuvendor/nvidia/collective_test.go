package nvidia

import (
	"slices"
	"strconv"
	"testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

func TestCollective(t *testing.T) {
	c := vendor.Collective()
	if c.Library() != "NCCL" || c.SystemVersion() != "1" || c.LinkTag() != "nvlink" || c.PeerLink() != inventory.LinkNVLink {
		t.Errorf("NCCL flavour: %s %s %s %s", c.Library(), c.SystemVersion(), c.LinkTag(), c.PeerLink())
	}
	for _, tc := range []struct {
		g       inventory.GPU
		gbps    int64
		attrs   [][2]string
		wantErr bool
	}{
		{inventory.GPU{Architecture: "hopper", ComputeCapability: "9.0"}, 25, [][2]string{{"sm", "90"}}, false},
		{inventory.GPU{Architecture: "pascal", ComputeCapability: "6.0"}, 20, [][2]string{{"sm", "60"}}, false},
		{inventory.GPU{Architecture: "blackwell", ComputeCapability: "10.0"}, 50, [][2]string{{"sm", "100"}}, false},
		{inventory.GPU{Architecture: "ampere", ComputeCapability: "8"}, 25, nil, true},
		{inventory.GPU{Architecture: "ampere", ComputeCapability: "8.10"}, 25, nil, true},
	} {
		if got := c.LinkGBps(&tc.g); got != tc.gbps {
			t.Errorf("%s: %d GB/s a link, want %d", tc.g.Architecture, got, tc.gbps)
		}
		attrs, err := c.GPUAttrs(&tc.g)
		if (err != nil) != tc.wantErr || !slices.Equal(attrs, tc.attrs) {
			t.Errorf("compute capability %q: attrs %v, %v; want %v (error %v)", tc.g.ComputeCapability, attrs, err, tc.attrs, tc.wantErr)
		}
		if got := c.PCIClass(&tc.g); got != "0x030200" {
			t.Errorf("class %s", got)
		}
	}
}

func TestOrderedDevicesEnv(t *testing.T) {
	gpus := []*inventory.GPU{{UUID: "GPU-b"}, {UUID: "GPU-a"}}
	if got, err := vendor.OrderedDevicesEnv(gpus); err != nil || got != "CUDA_VISIBLE_DEVICES=GPU-b,GPU-a" {
		t.Errorf("env %q, %v", got, err)
	}
	if _, err := vendor.OrderedDevicesEnv([]*inventory.GPU{{UUID: "", PCIBusID: "0000:18:00.0"}}); err == nil {
		t.Error("a GPU without UUID was listed")
	}
}

// TestOwnSpecKeys: a device of nvidia-ctk's spec and the claim's device
// that is the same GPU or MIG device meet on one key; anything else on none.
func TestOwnSpecKeys(t *testing.T) {
	s := vendor.OwnSpec()
	if s.Kind() != "nvidia.com/gpu" {
		t.Errorf("kind %s", s.Kind())
	}
	gi, ci, err := MIGCapMinors(3, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	migNodes := []string{"/dev/nvidia3", "/dev/nvidia-caps/nvidia-cap" + itoa(gi), "/dev/nvidia-caps/nvidia-cap" + itoa(ci)}
	for _, tc := range []struct {
		name  string
		nodes []string
		g     inventory.GPU
		p     *inventory.Partition
		match bool
	}{
		{"whole GPU", []string{"/dev/nvidia3"}, inventory.GPU{Minor: 3}, nil, true},
		{"another GPU", []string{"/dev/nvidia2"}, inventory.GPU{Minor: 3}, nil, false},
		{"MIG device", migNodes, inventory.GPU{Minor: 3}, &inventory.Partition{GPUInstanceID: 1, ComputeInstanceID: 0}, true},
		{"MIG device vs its GPU", migNodes, inventory.GPU{Minor: 3}, nil, false},
		{"DRM nodes beside", []string{"/dev/nvidia3", "/dev/dri/card1", "/dev/dri/renderD128"}, inventory.GPU{Minor: 3}, nil, true},
	} {
		k, ok := s.Key(tc.nodes)
		dk, dok := s.DeviceKey(&tc.g, tc.p)
		if got := ok && dok && k == dk; got != tc.match {
			t.Errorf("%s: spec key %q (%v), device key %q (%v): match %v, want %v", tc.name, k, ok, dk, dok, got, tc.match)
		}
	}
	if _, ok := s.Key([]string{"/dev/nvidia0", "/dev/nvidia1"}); ok {
		t.Error("a device of two GPUs got a key")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
