package amd

import (
	"reflect"
	"slices"
	"testing"

	"github.com/tessera-gpu/tessera/internal/gpuvendor"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

func TestDeviceNodes(t *testing.T) {
	gpu := &inventory.GPU{Vendor: inventory.VendorAMD, Minor: 1, RenderMinor: 129}
	xcp := &inventory.Partition{Kind: inventory.PartitionXCP, UUID: "amd-0-xcp-1", Minor: 9, RenderMinor: 137}
	tests := []struct {
		name    string
		gpu     *inventory.GPU
		part    *inventory.Partition
		want    []gpuvendor.Node
		wantErr string
	}{
		{name: "whole GPU: render node, then card", gpu: gpu, want: []gpuvendor.Node{node("dri/renderD129", "drm", 129), node("dri/card1", "drm", 1)}},
		// A compute partition is its own DRM device, not the parent's.
		{name: "compute partition", gpu: gpu, part: xcp, want: []gpuvendor.Node{node("dri/renderD137", "drm", 137), node("dri/card9", "drm", 9)}},
		{name: "MIG on AMD", gpu: gpu, part: &inventory.Partition{Kind: inventory.PartitionMIG, UUID: "m"}, wantErr: `AMD partition m has kind "mig", want "xcp"`},
		{name: "negative card minor", gpu: &inventory.GPU{Minor: -2, RenderMinor: 128}, wantErr: "card minor -2 is negative"},
		{name: "negative render minor", gpu: gpu, part: &inventory.Partition{Kind: inventory.PartitionXCP, Minor: 9, RenderMinor: -1}, wantErr: "render minor -1 is negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := vendor.DeviceNodes(tc.gpu, tc.part)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("nodes = %v, want %v", got, tc.want)
			}
			own, _ := vendor.GPUNodes(tc.gpu)
			if tc.part != nil {
				own, _ = vendor.PartitionNodes(tc.gpu, tc.part)
			}
			if !reflect.DeepEqual(own, got) {
				t.Errorf("own nodes %v, DeviceNodes %v", own, got)
			}
		})
	}
}

func TestCommon(t *testing.T) {
	if got := vendor.CommonNodes(); !reflect.DeepEqual(got, []gpuvendor.Node{node("kfd", "kfd", 0)}) {
		t.Errorf("common nodes %v", got)
	}
	if got := vendor.HostNodes([]*inventory.GPU{{Partitioning: &inventory.Partitioning{Kind: inventory.PartitionXCP}}}); got != nil {
		t.Errorf("host nodes %v", got)
	}
	// ROCm needs no variable to find its GPUs.
	if env, err := vendor.CommonEnv([]gpuvendor.Device{{GPU: &inventory.GPU{}}}); env != nil || err != nil {
		t.Errorf("env %q, %v", env, err)
	}
	for _, n := range vendor.CommonNodes() {
		if !slices.Contains(vendor.Majors(), n.Major) {
			t.Errorf("%s: major %q is not one of %v", n.Path, n.Major, vendor.Majors())
		}
	}
}

func TestCapabilities(t *testing.T) {
	// Fixed time-slice interval, no MPS, shares the scheduler's accounting.
	// Partitions stay in the GPU's xGMI hive; they are a GPU-wide mode, which
	// the agent sets per claim with --partitioning=dynamic.
	want := gpuvendor.Capabilities{PartitionKind: inventory.PartitionXCP, DynamicPartitions: true, PartitionModes: true, PartitionPeerLinks: true, Passthrough: true, HostDriver: "amdgpu", PCIVendorID: "0x1002",
		DmemRegion: "drm/%s/vram0", KernelLimit: "dmem"}
	if got := vendor.Capabilities(); got != want {
		t.Errorf("capabilities %+v, want %+v", got, want)
	}
	if vendor.Name() != inventory.VendorAMD || vendor.DisplayName() != "AMD" {
		t.Errorf("named %q, %q", vendor.Name(), vendor.DisplayName())
	}
}

// vendor is the one under test.
var vendor = Vendor{}

func node(path, major string, minor int64) gpuvendor.Node {
	return gpuvendor.Node{Path: path, Major: major, Minor: minor}
}
