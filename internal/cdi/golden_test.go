package cdi

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-gpu/tessera/api/gpu/v1alpha1"
	"github.com/tessera-gpu/tessera/internal/golden"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/sharing"
)

// TestSpecGolden pins the bytes of the spec file for each kind of device a
// claim can hold, so that a change to how vendors' nodes and environment
// are laid out shows up as a diff here.
func TestSpecGolden(t *testing.T) {
	amdPart := &inventory.Partition{Kind: inventory.PartitionXCP, Profile: "CPX", UUID: "amd-0-xcp-1", Minor: 9, RenderMinor: 137}
	mpsDev := func(i int, g inventory.GPU, p *inventory.Partition, limit int64) ClaimDevice {
		d := dev(i, g, p)
		d.Sharing = &sharing.Settings{Strategy: v1alpha1.MPS, MPSActiveThreadPercentage: 50, MPSPinnedMemoryLimit: limit}
		d.MPSPipeDir = "/var/lib/tessera/mps/" + uidA
		return d
	}
	tsDev := func(i int, g inventory.GPU, ts v1alpha1.TimeSliceInterval) ClaimDevice {
		d := dev(i, g, nil)
		d.Sharing = &sharing.Settings{Strategy: v1alpha1.TimeSlicing, TimeSlice: ts}
		return d
	}
	share := dev(0, nvidiaGPU(1), nil)
	share.ShareID = "7c1b"
	share.Sharing = &sharing.Settings{Strategy: v1alpha1.MPS, MPSPinnedMemoryLimit: 8 << 30, MPSActiveThreadPercentage: 25,
		Share: &sharing.Share{ID: "7c1b", MemoryBytes: 8 << 30, ComputeUnits: 33, Enforced: true}}
	share.MPSPipeDir = "/var/lib/tessera/mps/gpu-1"
	amdShare := dev(0, amdGPU(2), nil)
	amdShare.ShareID = "9e2f"
	amdShare.Sharing = &sharing.Settings{Share: &sharing.Share{ID: "9e2f", MemoryBytes: 20 << 30}}

	tests := []struct {
		name   string
		devs   []ClaimDevice
		vendor bool // resolve against the nvidia-ctk spec of vendorspec_test.go
	}{
		{name: "nvidia-gpu", devs: []ClaimDevice{dev(0, nvidiaGPU(3), nil)}},
		{name: "nvidia-gpus", devs: []ClaimDevice{dev(0, nvidiaGPU(0), nil), dev(1, nvidiaGPU(1), nil), dev(2, nvidiaGPU(0), nil)}},
		{name: "nvidia-mig", devs: []ClaimDevice{dev(0, nvidiaGPU(2), migPartition(3, 0)), dev(1, nvidiaGPU(2), migPartition(13, 2))}},
		{name: "amd-gpu", devs: []ClaimDevice{dev(0, amdGPU(1), nil)}},
		{name: "amd-partition", devs: []ClaimDevice{dev(0, amdGPU(0), amdPart)}},
		{name: "mixed", devs: []ClaimDevice{dev(0, amdGPU(1), nil), dev(1, nvidiaGPU(0), nil), dev(2, nvidiaGPU(4), migPartition(7, 0)), dev(3, amdGPU(0), amdPart)}},
		{name: "mps-and-time-slicing", devs: []ClaimDevice{mpsDev(0, nvidiaGPU(0), nil, 4<<30), mpsDev(1, nvidiaGPU(1), migPartition(9, 1), 0), tsDev(2, nvidiaGPU(2), v1alpha1.LongTimeSlice), tsDev(3, amdGPU(0), v1alpha1.DefaultTimeSlice)}},
		{name: "nvidia-share", devs: []ClaimDevice{share}},
		{name: "amd-share", devs: []ClaimDevice{amdShare}},
		{name: "nvidia-vendor-spec", vendor: true, devs: []ClaimDevice{dev(0, nvidiaGPU(1), nil), dev(1, nvidiaGPU(2), nil), dev(2, nvidiaGPU(0), migPartition(7, 0)), dev(3, nvidiaGPU(5), nil), dev(4, amdGPU(0), nil)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{SpecDir: t.TempDir(), DevRoot: "/var/lib/tessera/sim/dev", DeviceNumbers: simNumbers}
			if tc.vendor {
				dir := t.TempDir()
				if err := os.WriteFile(filepath.Join(dir, "nvidia.yaml"), []byte(nvidiaCTKSpec), 0o644); err != nil {
					t.Fatal(err)
				}
				o.VendorSpecDirs = []string{dir}
			}
			w, err := NewWriter(o)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := writeSpec(w, ClaimRef{UID: uidA, Namespace: "team-a", Name: "train"}, tc.devs); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(w.SpecPath(uidA))
			if err != nil {
				t.Fatal(err)
			}
			specGolden(t, tc.name, got)
		})
	}
}

// specGolden compares got with testdata/golden/name.json (internal/golden).
func specGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if filepath.Ext(name) == "" {
		path += ".json"
	}
	golden.Compare(t, path, got)
}

// TestSpecErrorsGolden pins the whole message of each way a claim's devices
// can be refused, where TestWriteClaimSpecRejects checks only a part.
func TestSpecErrorsGolden(t *testing.T) {
	noUUID := dev(0, nvidiaGPU(0), migPartition(1, 0))
	noUUID.Partition.UUID = ""
	negMinor := dev(0, nvidiaGPU(0), nil)
	negMinor.GPU.Minor = -1
	negCard := dev(0, amdGPU(0), nil)
	negCard.GPU.Minor = -2
	negRender := dev(0, amdGPU(0), &inventory.Partition{Kind: inventory.PartitionXCP, UUID: "x", Minor: 9, RenderMinor: -1})
	unknown := dev(0, nvidiaGPU(0), nil)
	unknown.GPU.Vendor = "intel"
	cases := []struct {
		name string
		devs []ClaimDevice
	}{
		{"unknown vendor", []ClaimDevice{unknown}},
		{"NVIDIA partition not MIG", []ClaimDevice{dev(0, nvidiaGPU(0), &inventory.Partition{Kind: inventory.PartitionXCP, UUID: "x"})}},
		{"AMD partition not XCP", []ClaimDevice{dev(0, amdGPU(0), migPartition(1, 0))}},
		{"MIG GI out of range", []ClaimDevice{dev(0, nvidiaGPU(0), migPartition(15, 0))}},
		{"MIG CI out of range", []ClaimDevice{dev(0, nvidiaGPU(0), migPartition(1, 8))}},
		{"MIG without UUID", []ClaimDevice{dev(1, nvidiaGPU(1), nil), noUUID}},
		{"negative GPU minor", []ClaimDevice{negMinor}},
		{"negative card minor", []ClaimDevice{negCard}},
		{"negative render minor", []ClaimDevice{negRender}},
	}
	var b bytes.Buffer
	for _, tc := range cases {
		w, _ := newTestWriter(t, simNumbers)
		_, err := writeSpec(w, ClaimRef{UID: uidA, Namespace: "ns", Name: "c"}, tc.devs)
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		b.WriteString(tc.name + ": " + err.Error() + "\n")
	}
	specGolden(t, "errors.txt", b.Bytes())
}
