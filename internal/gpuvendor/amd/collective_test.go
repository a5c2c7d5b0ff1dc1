package amd

import (
	"slices"
	"testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

func TestCollective(t *testing.T) {
	c := vendor.Collective()
	if c.Library() != "RCCL" || c.SystemVersion() != "2" || c.LinkTag() != "xgmi" || c.PeerLink() != inventory.LinkXGMI {
		t.Errorf("RCCL flavour: %s %s %s %s", c.Library(), c.SystemVersion(), c.LinkTag(), c.PeerLink())
	}
	for _, tc := range []struct {
		g       inventory.GPU
		gbps    int64
		class   string
		attrs   [][2]string
		wantErr bool
	}{
		{inventory.GPU{Architecture: "cdna3", ComputeUnits: 304, GFXVersion: "9.4.2"}, 64, "0x120000", [][2]string{{"sm", "304"}, {"gcn", "gfx942"}}, false},
		{inventory.GPU{Architecture: "cdna2", ComputeUnits: 110, GFXVersion: "9.0.10"}, 50, "0x038000", [][2]string{{"sm", "110"}, {"gcn", "gfx90a"}}, false},
		{inventory.GPU{Architecture: "cdna3", ComputeUnits: 0, GFXVersion: "9.4.2"}, 64, "0x120000", nil, true},
		{inventory.GPU{Architecture: "cdna3", ComputeUnits: 304, GFXVersion: "9.4"}, 64, "0x120000", nil, true},
	} {
		if got := c.LinkGBps(&tc.g); got != tc.gbps {
			t.Errorf("%s: %d GB/s a link, want %d", tc.g.Architecture, got, tc.gbps)
		}
		if got := c.PCIClass(&tc.g); got != tc.class {
			t.Errorf("%s: class %s, want %s", tc.g.Architecture, got, tc.class)
		}
		attrs, err := c.GPUAttrs(&tc.g)
		if (err != nil) != tc.wantErr || !slices.Equal(attrs, tc.attrs) {
			t.Errorf("%+v: attrs %v, %v; want %v (error %v)", tc.g, attrs, err, tc.attrs, tc.wantErr)
		}
	}
}

// TestOrderedDevicesEnv: ROCm's form of a unique id, GPU- and the hex id.
func TestOrderedDevicesEnv(t *testing.T) {
	gpus := []*inventory.GPU{{UUID: "7a2b"}, {UUID: "GPU-1c3d"}}
	if got, err := vendor.OrderedDevicesEnv(gpus); err != nil || got != "HIP_VISIBLE_DEVICES=GPU-7a2b,GPU-1c3d" {
		t.Errorf("env %q, %v", got, err)
	}
	if _, err := vendor.OrderedDevicesEnv([]*inventory.GPU{{PCIBusID: "0000:18:00.0"}}); err == nil {
		t.Error("a GPU without unique id was listed")
	}
	if vendor.OwnSpec() != nil {
		t.Error("ROCm ships no node-wide spec")
	}
}
