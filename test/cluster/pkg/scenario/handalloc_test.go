package scenario

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestAllocateGPUOf: a claim annotated allocate-gpu-of gets the whole GPU
// the named pod's slice is carved from, its pod is created on that node
// past the scheduler, and the claim is reserved for it.
func TestAllocateGPUOf(t *testing.T) {
	ctx := context.Background()
	str := func(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }
	sliceClaim, forced := "notebook-slice", "forced"
	client := fake.NewClientset(
		&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "notebook", Namespace: "ns"},
			Spec:       corev1.PodSpec{NodeName: "node-a"},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning, ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "slice", ResourceClaimName: &sliceClaim}}},
		},
		&resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: sliceClaim, Namespace: "ns"},
			Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
				{Request: "slice", Driver: "gpu.tessera.dev", Pool: "node-a", Device: "gpu-1-mig-1g-10gb-6"},
			}}}},
		},
		&resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "node-a-gpu"},
			Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.tessera.dev", NodeName: ptr("node-a"), Pool: resourceapi.ResourcePool{Name: "node-a"}, Devices: []resourceapi.Device{
				{Name: "gpu-0", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"type": str("gpu"), "uuid": str("GPU-0")}},
				{Name: "gpu-1", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"type": str("gpu"), "uuid": str("GPU-1")}},
				{Name: "gpu-1-mig-1g-10gb-6", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"type": str("partition"), "parentUUID": str("GPU-1")}},
			}},
		},
	)
	c := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: forced, Annotations: map[string]string{AllocateGPUOfAnnotation: "notebook"}},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "vfio.gpu.tessera.dev"}}}}},
	}
	vm := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "vm"}, Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &forced}}}}
	sc := &Scenario{Claims: []*resourceapi.ResourceClaim{c}, Pods: []*corev1.Pod{vm}}
	if _, err := client.ResourceV1().ResourceClaims("ns").Create(ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := sc.applyHandAllocated(ctx, client, "ns"); err != nil {
		t.Fatal(err)
	}
	p, err := client.CoreV1().Pods("ns").Get(ctx, "vm", metav1.GetOptions{})
	if err != nil || p.Spec.NodeName != "node-a" {
		t.Fatalf("pod vm: %v, spec.nodeName %q, want node-a", err, p.Spec.NodeName)
	}
	got, err := client.ResourceV1().ResourceClaims("ns").Get(ctx, forced, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a := got.Status.Allocation; a == nil || len(a.Devices.Results) != 1 || a.Devices.Results[0].Device != "gpu-1" || a.Devices.Results[0].Request != "gpu" {
		t.Errorf("claim %s: status.allocation %+v, want request gpu on gpu-1 (the slice's GPU)", forced, a)
	}
	if r := got.Status.ReservedFor; len(r) != 1 || r[0].Name != "vm" {
		t.Errorf("claim %s: status.reservedFor %+v, want pod vm", forced, r)
	}
}

func ptr[T any](v T) *T { return &v }
