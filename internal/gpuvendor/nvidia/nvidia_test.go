package nvidia

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/gpuvendor"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

func mig(gi, ci int) *inventory.Partition {
	return &inventory.Partition{Kind: inventory.PartitionMIG, UUID: fmt.Sprintf("MIG-%d-%d", gi, ci), GPUInstanceID: gi, ComputeInstanceID: ci}
}

func TestDeviceNodes(t *testing.T) {
	gpu := func(minor int) *inventory.GPU {
		return &inventory.GPU{Vendor: inventory.VendorNVIDIA, UUID: "GPU-a", Minor: minor}
	}
	tests := []struct {
		name    string
		gpu     *inventory.GPU
		part    *inventory.Partition
		want    []gpuvendor.Node
		wantErr string
	}{
		{name: "whole GPU", gpu: gpu(3), want: []gpuvendor.Node{node("nvidia3", "nvidia-frontend", 3)}},
		{name: "MIG instance: the parent, then GI and CI access", gpu: gpu(2), part: mig(3, 0), want: []gpuvendor.Node{
			node("nvidia2", "nvidia-frontend", 2), node("nvidia-caps/nvidia-cap300", "nvidia-caps", 300), node("nvidia-caps/nvidia-cap301", "nvidia-caps", 301)}},
		{name: "compute instance 2", gpu: gpu(0), part: mig(13, 2), want: []gpuvendor.Node{
			node("nvidia0", "nvidia-frontend", 0), node("nvidia-caps/nvidia-cap120", "nvidia-caps", 120), node("nvidia-caps/nvidia-cap123", "nvidia-caps", 123)}},
		{name: "negative minor", gpu: gpu(-1), wantErr: "GPU minor -1 is negative"},
		{name: "negative minor of a parent", gpu: gpu(-1), part: mig(1, 0), wantErr: "GPU minor -1 is negative"},
		{name: "XCP on NVIDIA", gpu: gpu(0), part: &inventory.Partition{Kind: inventory.PartitionXCP, UUID: "x"}, wantErr: `NVIDIA partition x has kind "xcp", want "mig"`},
		{name: "GI out of range", gpu: gpu(0), part: mig(15, 0), wantErr: "NVIDIA partition MIG-15-0: MIG GPU instance ID 15 outside 0..14"},
		{name: "CI out of range", gpu: gpu(0), part: mig(1, 8), wantErr: "NVIDIA partition MIG-1-8: MIG compute instance ID 8 outside 0..7"},
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
			// A container's nodes are the GPU's plus what the partition
			// has of its own.
			own, _ := vendor.GPUNodes(tc.gpu)
			if tc.part != nil {
				p, err := vendor.PartitionNodes(tc.gpu, tc.part)
				if err != nil {
					t.Fatal(err)
				}
				own = append(own, p...)
			}
			if !reflect.DeepEqual(own, got) {
				t.Errorf("GPUNodes+PartitionNodes = %v, DeviceNodes = %v", own, got)
			}
		})
	}
}

func TestCommonAndHostNodes(t *testing.T) {
	if got := gpuvendor.Paths(vendor.CommonNodes()); !slices.Equal(got, []string{"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"}) {
		t.Errorf("common nodes %v", got)
	}
	plain := &inventory.GPU{}
	migCapable := &inventory.GPU{Partitioning: &inventory.Partitioning{Kind: inventory.PartitionMIG}}
	tests := []struct {
		name string
		gpus []*inventory.GPU
		want []gpuvendor.Node
	}{
		{name: "no MIG-capable GPU", gpus: []*inventory.GPU{plain, plain}},
		{name: "one MIG-capable GPU, MIG mode off or on", gpus: []*inventory.GPU{plain, migCapable},
			want: []gpuvendor.Node{node("nvidia-caps/nvidia-cap1", "nvidia-caps", 1), node("nvidia-caps/nvidia-cap2", "nvidia-caps", 2)}},
	}
	for _, tc := range tests {
		if got := vendor.HostNodes(tc.gpus); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	for _, n := range append(vendor.CommonNodes(), vendor.HostNodes([]*inventory.GPU{migCapable})...) {
		if !slices.Contains(vendor.Majors(), n.Major) {
			t.Errorf("%s: major %q is not one of %v", n.Path, n.Major, vendor.Majors())
		}
	}
}

func TestCommonEnv(t *testing.T) {
	a := &inventory.GPU{UUID: "GPU-a"}
	b := &inventory.GPU{UUID: "GPU-b"}
	tests := []struct {
		name    string
		devs    []gpuvendor.Device
		want    []string
		wantErr string
	}{
		{name: "GPUs by GPU UUID, in claim order", devs: []gpuvendor.Device{{GPU: b}, {GPU: a}}, want: []string{"NVIDIA_VISIBLE_DEVICES=GPU-b,GPU-a"}},
		{name: "MIG by MIG UUID", devs: []gpuvendor.Device{{GPU: a, Partition: mig(7, 0)}, {GPU: b}}, want: []string{"NVIDIA_VISIBLE_DEVICES=MIG-7-0,GPU-b"}},
		{name: "one GPU twice is named once", devs: []gpuvendor.Device{{GPU: a}, {GPU: b}, {GPU: a}}, want: []string{"NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b"}},
		{name: "no UUID", devs: []gpuvendor.Device{{GPU: a}, {Name: "pool/gpu-1", GPU: &inventory.GPU{}}}, wantErr: "NVIDIA device pool/gpu-1 has no UUID"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := vendor.CommonEnv(tc.devs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("env = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestCapabilities(t *testing.T) {
	want := gpuvendor.Capabilities{PartitionKind: inventory.PartitionMIG, DynamicPartitions: true, Passthrough: true, HostDriver: "nvidia", PCIVendorID: "0x10de",
		TimeSliceIntervals: true, MPS: true, EnforcedShares: true,
		DmemRegion: "nvidia/%s/vidmem", KernelLimit: "nvml", KernelMemoryDriver: "615.0.0", MPSNamespacesDriver: "615.0.0"}
	if got := vendor.Capabilities(); got != want {
		t.Errorf("capabilities %+v, want %+v", got, want)
	}
	if vendor.Name() != inventory.VendorNVIDIA || vendor.DisplayName() != "NVIDIA" {
		t.Errorf("named %q, %q", vendor.Name(), vendor.DisplayName())
	}
}

// vendor is the one under test.
var vendor = Vendor{}

func node(path, major string, minor int64) gpuvendor.Node {
	return gpuvendor.Node{Path: path, Major: major, Minor: minor}
}
