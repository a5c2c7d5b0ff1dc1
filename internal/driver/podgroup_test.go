package driver

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/tessera-gpu/tessera/internal/cdi"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/nccltopo"
)

// addPodGroupClaim creates a claim as the control plane makes one for a
// PodGroup (docs/training.md, "Gangs"): owned by the group, reserved for
// it, with one request per worker (worker-i gets devices[i]).
func (n *node) addPodGroupClaim(name, group, config string, devices ...string) *drapbv1.Claim {
	n.t.Helper()
	yes := true
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "scheduling.k8s.io/v1beta1", Kind: "PodGroup", Name: group, UID: "uid-" + types.UID(group), Controller: &yes}}}}
	c.Status.Allocation = &resourceapi.AllocationResult{}
	c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{APIGroup: "scheduling.k8s.io", Resource: "podgroups", Name: group, UID: "uid-" + types.UID(group)}}
	if config != "" {
		c.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{{
			Source: resourceapi.AllocationConfigSourceClaim,
			DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
				Driver: names.DriverName, Parameters: runtime.RawExtension{Raw: []byte(config)},
			}},
		}}
	}
	for i, d := range devices {
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: "worker-" + strconv.Itoa(i), Driver: names.DriverName, Pool: "node-1", Device: d,
		})
	}
	if _, err := n.client.ResourceV1().ResourceClaims("default").Create(n.ctx, c, metav1.CreateOptions{}); err != nil {
		n.t.Fatal(err)
	}
	return &drapbv1.Claim{Namespace: "default", Name: name, Uid: string(c.UID)}
}

// kubeletCDIIDs is what the kubelet hands a container of the prepared
// devices (its cdiDevicesAsList): those of the request it names, or all
// when it names the claim ("").
func kubeletCDIIDs(devs []*drapbv1.Device, request string) []string {
	var out []string
	for _, d := range devs {
		if request == "" || len(d.RequestNames) == 0 || slices.Contains(d.RequestNames, request) {
			out = append(out, d.CdiDeviceIds...)
		}
	}
	return out
}

// A pod-group claim, one request per worker, through the kubelet's gRPC
// API: prepared once however many workers ask, each worker's container
// gets its own GPU in its device nodes and in every variable naming GPUs
// (NVIDIA_VISIBLE_DEVICES, the NCCL file's CUDA_VISIBLE_DEVICES), while a
// container naming the whole claim gets all four in the file's rank order.
func TestPodGroupClaimPerWorker(t *testing.T) {
	n := newNode(t, "dgx-h100")
	res := n.driver.Published()
	gpus := []string{"gpu-6", "gpu-1", "gpu-4", "gpu-3"}
	claim := n.addPodGroupClaim("train-gpu", "train", ncclTopoConfig, gpus...)

	resp := n.prepare(claim)
	got := resp.Claims[claim.Uid]
	if got.GetError() != "" {
		t.Fatalf("prepare: %s", got.GetError())
	}
	// One entry per device, then the whole-claim entry.
	if len(got.Devices) != len(gpus)+1 {
		t.Fatalf("%d device entries, want %d and the whole-claim one", len(got.Devices), len(gpus))
	}
	last := got.Devices[len(got.Devices)-1]
	if !slices.Equal(last.RequestNames, []string{cdi.WholeClaimRequest}) || last.DeviceName != gpus[len(gpus)-1] {
		t.Errorf("last entry = %+v, want the last device under %s", last, cdi.WholeClaimRequest)
	}

	wholeVisible := ""
	for i, g := range gpus {
		uuid := res.Devices[g].GPU.UUID
		spec := resolve(t, n.cdiDir(), kubeletCDIIDs(got.Devices, "worker-"+strconv.Itoa(i)))
		gpuNodes := slices.DeleteFunc(devicePaths(spec), func(p string) bool {
			return !strings.HasPrefix(p, "/dev/nvidia") || strings.Contains(p, "-") || p == "/dev/nvidiactl"
		})
		if want := []string{"/dev/nvidia" + itoa(res.Devices[g].GPU.Minor)}; !slices.Equal(gpuNodes, want) {
			t.Errorf("worker-%d: GPU nodes %v, want %v", i, gpuNodes, want)
		}
		for _, v := range []string{"NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"} {
			if got := envValue(spec, v); got != uuid {
				t.Errorf("worker-%d: %s=%q, want its GPU %s only", i, v, got, uuid)
			}
		}
		if envValue(spec, nccltopo.FileEnv) == "" {
			t.Errorf("worker-%d: no %s", i, nccltopo.FileEnv)
		}
		wholeVisible += "," + uuid
	}
	all := resolve(t, n.cdiDir(), kubeletCDIIDs(got.Devices, ""))
	if v := envValue(all, "NVIDIA_VISIBLE_DEVICES"); len(strings.Split(v, ",")) != len(gpus) {
		t.Errorf("whole claim: NVIDIA_VISIBLE_DEVICES=%q, want its %d GPUs", v, len(gpus))
	}
	if v := envValue(all, "CUDA_VISIBLE_DEVICES"); len(strings.Split(v, ",")) != len(gpus) {
		t.Errorf("whole claim: CUDA_VISIBLE_DEVICES=%q, want its %d GPUs in rank order", v, len(gpus))
	}

	// Each worker's pod asks again: the same answer, nothing prepared twice.
	for range gpus {
		again := n.prepare(claim).Claims[claim.Uid]
		if again.GetError() != "" || len(again.Devices) != len(got.Devices) {
			t.Fatalf("prepare again: %+v", again)
		}
		for i := range again.Devices {
			if !slices.Equal(again.Devices[i].CdiDeviceIds, got.Devices[i].CdiDeviceIds) {
				t.Errorf("prepare again: entry %d IDs %q, first time %q", i, again.Devices[i].CdiDeviceIds, got.Devices[i].CdiDeviceIds)
			}
		}
	}
	if specs, _ := filepath.Glob(filepath.Join(n.cdiDir(), "*.json")); len(specs) != 1 {
		t.Errorf("spec files %v, want 1 for the group's claim", specs)
	}
	if r := n.unprepare(claim).Claims[claim.Uid]; r.GetError() != "" {
		t.Fatalf("unprepare: %s", r.GetError())
	}
	if specs, _ := filepath.Glob(filepath.Join(n.cdiDir(), "*.json")); len(specs) != 0 {
		t.Errorf("after unprepare: spec files %v", specs)
	}
}
