package sim

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/isolation"
)

// TestWriteCgroup: the simulated cgroup root reads back, through the
// agent's own reader, as the machine file says; dmem lists a region only
// for GPUs whose driver registers one (AMD; NVIDIA from r615).
func TestWriteCgroup(t *testing.T) {
	node := &inventory.Node{GPUs: []inventory.GPU{
		{Vendor: inventory.VendorAMD, PCIBusID: "0000:0c:00.0", MemoryBytes: 192 << 30},
		{Vendor: inventory.VendorNVIDIA, PCIBusID: "0000:18:00.0", DriverVersion: "580.65.6", MemoryBytes: 80 << 30},
		{Vendor: inventory.VendorNVIDIA, PCIBusID: "0000:19:00.0", DriverVersion: "615.2.0", MemoryBytes: 80 << 30},
	}}
	for _, tc := range []struct {
		c    Cgroup
		want isolation.Host
	}{
		{Cgroup{Version: 1}, isolation.Host{}},
		{Cgroup{Version: 2}, isolation.Host{CgroupV2: true}},
		{Cgroup{Version: 2, Dmem: true}, isolation.Host{CgroupV2: true, Dmem: true, Regions: map[string]int64{
			"drm/0000:0c:00.0/vram0": 192 << 30, "nvidia/0000:19:00.0/vidmem": 80 << 30}}},
	} {
		root := filepath.Join(t.TempDir(), "cgroup")
		// Whatever an earlier run left is replaced.
		if err := os.MkdirAll(filepath.Join(root, "stale"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := writeCgroup(root, tc.c, node); err != nil {
			t.Fatal(err)
		}
		got, err := isolation.ReadHost(root)
		if err != nil {
			t.Fatal(err)
		}
		tc.want.Root = root
		if got.CgroupV2 != tc.want.CgroupV2 || got.Dmem != tc.want.Dmem || len(got.Regions) != len(tc.want.Regions) {
			t.Errorf("%+v: read %+v, want %+v", tc.c, got, tc.want)
		}
		for r, n := range tc.want.Regions {
			if got.Regions[r] != n {
				t.Errorf("%+v: region %s = %d, want %d", tc.c, r, got.Regions[r], n)
			}
		}
		if _, err := os.Stat(filepath.Join(root, "stale")); err == nil {
			t.Errorf("%+v: the earlier tree was left", tc.c)
		}
	}
}
