package scenario

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// AllocateGPUOfAnnotation on a ResourceClaim names a pod of the scenario:
// once that pod runs, the claim is allocated by hand the whole GPU its
// first device is on (the GPU itself, or a partition's parent), as a
// scheduler bug would allocate it, and the pods that name the claim are
// created on that GPU's node, past the scheduler. A demo shows that way
// what the node's agent does with an allocation the scheduler never
// makes (a passthrough of a GPU that holds MIG slices: refused).
const AllocateGPUOfAnnotation = "demo.tessera.dev/allocate-gpu-of"

// handAllocated are the scenario's claims to allocate by hand, by name,
// each with the pod whose GPU it gets.
func (sc *Scenario) handAllocated() map[string]string {
	out := map[string]string{}
	for _, c := range sc.Claims {
		if pod := c.Annotations[AllocateGPUOfAnnotation]; pod != "" {
			out[c.Name] = pod
		}
	}
	return out
}

// namesClaim is the claim of handAllocated that pod p names, "" for none.
func namesClaim(p *corev1.Pod, hand map[string]string) string {
	for _, rc := range p.Spec.ResourceClaims {
		if rc.ResourceClaimName != nil && hand[*rc.ResourceClaimName] != "" {
			return *rc.ResourceClaimName
		}
	}
	return ""
}

// applyHandAllocated allocates each claim of AllocateGPUOfAnnotation by
// hand, once its pod runs, and creates the pods that name it.
func (sc *Scenario) applyHandAllocated(ctx context.Context, client kubernetes.Interface, ns string) error {
	hand := sc.handAllocated()
	for _, c := range sc.Claims {
		if hand[c.Name] == "" {
			continue
		}
		var pods []*corev1.Pod
		for _, p := range sc.Pods {
			if namesClaim(p, hand) == c.Name {
				pods = append(pods, p)
			}
		}
		if err := allocateByHand(ctx, client, ns, c.Name, hand[c.Name], pods); err != nil {
			return err
		}
	}
	return nil
}

// allocateByHand allocates claim the GPU of pod gpuOf, creates pods (which
// name the claim) on its node and reserves the claim for them: the kubelet
// then prepares it as if the scheduler had.
func allocateByHand(ctx context.Context, client kubernetes.Interface, ns, claim, gpuOf string, pods []*corev1.Pod) error {
	if err := WaitRunning(ctx, client, ns, []string{gpuOf}, 120*time.Second); err != nil {
		return fmt.Errorf("ResourceClaim %s: annotation %s names pod %s, which does not run: %w", claim, AllocateGPUOfAnnotation, gpuOf, err)
	}
	node, gpu, err := gpuOfPod(ctx, client, ns, gpuOf)
	if err != nil {
		return fmt.Errorf("ResourceClaim %s: annotation %s: %w", claim, AllocateGPUOfAnnotation, err)
	}
	c, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if len(c.Spec.Devices.Requests) != 1 {
		return fmt.Errorf("ResourceClaim %s: spec.devices.requests: %d requests, a claim allocated by hand has one", claim, len(c.Spec.Devices.Requests))
	}
	for _, p := range pods {
		p = p.DeepCopy()
		// Named to its node, no scheduler takes part: one would allocate
		// the claim again in its own cache and fail to reserve it.
		p.Spec.NodeName = node
		created, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("create Pod %s: %w", p.Name, err)
		}
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: created.Name, UID: created.UID})
	}
	c.Status.Allocation = &resourceapi.AllocationResult{
		Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: c.Spec.Devices.Requests[0].Name, Driver: gpu.driver, Pool: gpu.pool, Device: gpu.name,
		}}},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}},
	}
	if _, err := client.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("ResourceClaim %s: allocate %s/%s by hand: %w", claim, gpu.pool, gpu.name, err)
	}
	return nil
}

// publishedDevice is a device as a ResourceSlice lists it.
type publishedDevice struct {
	driver, pool, name string
	attrs              map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
}

// gpuOfPod is the node of pod's first allocated device and the whole GPU
// that device is (or is a partition of), as published.
func gpuOfPod(ctx context.Context, client kubernetes.Interface, ns, pod string) (string, publishedDevice, error) {
	first, node, err := firstDevice(ctx, client, ns, pod)
	if err != nil {
		return "", publishedDevice{}, err
	}
	devs, err := nodeDevices(ctx, client, node, first.Pool)
	if err != nil {
		return "", publishedDevice{}, err
	}
	uuid := ""
	for _, d := range devs {
		if d.name == first.Device {
			uuid = AttrString(d.attrs["uuid"])
			if p := AttrString(d.attrs["parentUUID"]); p != "" {
				uuid = p
			}
		}
	}
	for _, d := range devs {
		if uuid != "" && AttrString(d.attrs["type"]) == "gpu" && AttrString(d.attrs["uuid"]) == uuid {
			return node, d, nil
		}
	}
	return "", publishedDevice{}, fmt.Errorf("pod %s's device %s/%s: no whole GPU of uuid %q published", pod, first.Pool, first.Device, uuid)
}

// firstDevice is the first device allocated to pod's first claim, and
// the pod's node.
func firstDevice(ctx context.Context, client kubernetes.Interface, ns, pod string) (resourceapi.DeviceRequestAllocationResult, string, error) {
	var none resourceapi.DeviceRequestAllocationResult
	p, err := client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return none, "", err
	}
	var claim string
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			claim = *s.ResourceClaimName
			break
		}
	}
	for _, rc := range p.Spec.ResourceClaims {
		if claim == "" && rc.ResourceClaimName != nil {
			claim = *rc.ResourceClaimName
		}
	}
	if claim == "" {
		return none, "", fmt.Errorf("pod %s: spec.resourceClaims: no claim", pod)
	}
	c, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return none, "", err
	}
	if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) == 0 {
		return none, "", fmt.Errorf("pod %s: ResourceClaim %s: status.allocation: no device", pod, claim)
	}
	return c.Status.Allocation.Devices.Results[0], p.Spec.NodeName, nil
}

// nodeDevices lists the devices node's slices of pool publish.
func nodeDevices(ctx context.Context, client kubernetes.Interface, node, pool string) ([]publishedDevice, error) {
	l, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices of node %s: %w", node, err)
	}
	var out []publishedDevice
	for _, s := range l.Items {
		if s.Spec.Pool.Name != pool {
			continue
		}
		for _, d := range s.Spec.Devices {
			out = append(out, publishedDevice{s.Spec.Driver, s.Spec.Pool.Name, d.Name, d.Attributes})
		}
	}
	return out, nil
}
