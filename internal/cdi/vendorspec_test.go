package cdi

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/tessera-gpu/tessera/internal/gpuvendor/nvidia"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
)

// A node-wide spec in the shape `nvidia-ctk cdi generate` writes: devices
// named by index (whole GPUs), by "<gpu>:<gi>" (MIG) and by UUID, plus
// "all", with the driver libraries as mounts in the common edits.
const nvidiaCTKSpec = `cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes: [{path: /dev/nvidia0, type: c, major: 195, minor: 0}]
- name: "1"
  containerEdits:
    deviceNodes: [{path: /dev/nvidia1, type: c, major: 195, minor: 1}]
- name: GPU-00000000-0000-0000-0000-000000000002
  containerEdits:
    deviceNodes: [{path: /dev/nvidia2, type: c, major: 195, minor: 2}]
- name: "0:7"
  containerEdits:
    deviceNodes:
    - {path: /dev/nvidia0, type: c, major: 195, minor: 0}
    - {path: /dev/nvidia-caps/nvidia-cap66, type: c, major: 511, minor: 66}
    - {path: /dev/nvidia-caps/nvidia-cap67, type: c, major: 511, minor: 67}
- name: all
  containerEdits:
    deviceNodes: [{path: /dev/nvidia0, type: c, major: 195, minor: 0}]
containerEdits:
  mounts:
  - {hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06, containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06, options: [ro, nosuid, nodev, bind]}
  deviceNodes: [{path: /dev/nvidiactl, type: c, major: 195, minor: 255}]
`

func TestVendorSpecIDs(t *testing.T) {
	vendorDir, specDir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(vendorDir, "nvidia.yaml"), []byte(nvidiaCTKSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(Options{SpecDir: specDir, DeviceNumbers: simNumbers, VendorSpecDirs: []string{vendorDir, specDir}})
	if err != nil {
		t.Fatal(err)
	}
	devs := []ClaimDevice{
		dev(0, nvidiaGPU(1), nil),                // by its single GPU node
		dev(1, nvidiaGPU(2), nil),                // by UUID
		dev(2, nvidiaGPU(0), migPartition(7, 0)), // MIG by capability nodes (gi 7 -> 66, ci 0 -> 67)
		dev(3, nvidiaGPU(5), nil),                // not in the vendor spec
		dev(4, amdGPU(0), nil),                   // another vendor
	}
	ids, err := writeSpec(w, ClaimRef{UID: uidA, Namespace: "ns", Name: "c"}, devs)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"nvidia.com/gpu=1", "nvidia.com/gpu=GPU-00000000-0000-0000-0000-000000000002", "nvidia.com/gpu=0:7", "", ""}
	for i, w := range want {
		var got string
		for _, id := range ids[i] {
			if len(id) > len(nvidia.CDIKind) && id[:len(nvidia.CDIKind)] == nvidia.CDIKind {
				got = id
			}
		}
		if got != w {
			t.Errorf("device %d: vendor ID %q, want %q (all: %v)", i, got, w, ids[i])
		}
	}

	// A runtime resolving the IDs against both directories gets the
	// driver library from the vendor spec and the nodes from ours.
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(vendorDir, specDir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	spec := &oci.Spec{}
	if _, err := cache.InjectDevices(spec, ids[0]...); err != nil {
		t.Fatal(err)
	}
	var mounts []string
	for _, m := range spec.Mounts {
		mounts = append(mounts, m.Destination)
	}
	if !slices.Contains(mounts, "/usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06") {
		t.Errorf("mounts %v lack the vendor spec's libcuda", mounts)
	}

	// Recovery from the spec's annotations keeps the vendor IDs.
	recs, err := w.ListClaimSpecs()
	if err != nil || len(recs) != 1 || !slices.Equal(recs[0].Devices[0].CDIDeviceIDs, ids[0]) {
		t.Errorf("recorded %+v, %v; want ids %v", recs, err, ids[0])
	}
}

func TestNoVendorDirsNoVendorIDs(t *testing.T) {
	w, dir := newTestWriter(t, simNumbers)
	ids, err := writeSpec(w, ClaimRef{UID: uidB, Namespace: "ns", Name: "c"}, []ClaimDevice{dev(0, nvidiaGPU(0), nil)})
	if err != nil {
		t.Fatal(err)
	}
	if len(ids[0]) != 2 {
		t.Errorf("ids %v: want only the claim spec's own", ids[0])
	}
	if _, err := inject(t, dir, ids[0]...); err != nil {
		t.Fatal(err)
	}
}
