package containerd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/memlimit"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// The shared L4 node's simulated machine has cgroup v2 with dmem and an
// R615 driver, and its chart release installs the memory limit hook: its
// shares are published memoryIsolation=kernel, and containerd's runc runs
// the hook for each of their containers. The hook runs against the
// simulator's cgroup tree (this host runs cgroup v1), mirroring each
// container's real cgroup path there.

// limitGPU is the L4 these tests share (GPU 3 of l4-4-r615), and its region.
const (
	limitGPU    = "0000:84:00.0"
	limitRegion = "nvidia/" + limitGPU + "/vidmem"
)

func simCgroupRoot(node string) string { return filepath.Join(cluster.SimStateDir(node), "cgroup") }
func limitStateDir(node string) string {
	return filepath.Join(cluster.SimStateDir(node), "memory-limits")
}

// limitRecords are the hook's records of the claim on node.
func limitRecords(t *testing.T, node, claimUID string) []memlimit.Record {
	t.Helper()
	recs, err := memlimit.Records(limitStateDir(node))
	if err != nil {
		t.Fatal(err)
	}
	var out []memlimit.Record
	for _, r := range recs {
		if r.ClaimUID == claimUID {
			out = append(out, r)
		}
	}
	return out
}

// runningContainer waits until the pod's container c runs and returns its
// runtime ID. The pod's phase alone does not do: right after a refused
// attempt its status may still name the attempt the runtime refused.
func runningContainer(t *testing.T, ns, pod, c string) string {
	t.Helper()
	ctx := context.Background()
	var id string
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == c && s.State.Running != nil && s.ContainerID != "" {
				id = strings.TrimPrefix(s.ContainerID, "containerd://")
				return true, ""
			}
		}
		return false, fmt.Sprintf("container %s not running: %+v", c, p.Status.ContainerStatuses)
	}); err != nil {
		t.Fatalf("pod %s/%s: %v", ns, pod, err)
	}
	return id
}

// checkLimit checks that pod holds the claim's one record, with container
// id its member, and that the pod's cgroup in the simulator's tree has the
// share's hard limit.
func checkLimit(t *testing.T, node, claimUID string, pod *corev1.Pod, id string, bytes int64) memlimit.Record {
	t.Helper()
	recs := limitRecords(t, node, claimUID)
	if len(recs) != 1 {
		t.Fatalf("claim %s: %d memory limit records, want 1: %+v", claimUID, len(recs), recs)
	}
	r := recs[0]
	if r.Pod != string(pod.UID) || len(r.Members) != 1 || r.Members[0].Container != id {
		t.Errorf("claim %s: limit held by pod %s, members %+v; want pod %s (%s), container %s", claimUID, r.Pod, r.Members, pod.Name, pod.UID, id)
	}
	// The kubelet made the pod a cgroup, under its node's root, and runc
	// the container one in it: the hook limits the pod's.
	if want := cluster.KubeletCgroupRoot(node) + "/kubepods/besteffort/pod" + string(pod.UID); r.Cgroup != want {
		t.Errorf("claim %s: limit set on cgroup %s, want pod %s's, %s", claimUID, r.Cgroup, pod.Name, want)
	}
	if len(r.Members) == 1 && r.Members[0].Cgroup != r.Cgroup+"/"+id {
		t.Errorf("claim %s: container %s in cgroup %s, not its own in the pod's", claimUID, id, r.Members[0].Cgroup)
	}
	if r.Region != limitRegion || r.Bytes != bytes || r.Mechanism != memlimit.Dmem {
		t.Errorf("claim %s: record %s on %s, want %dMiB of %s (dmem)", claimUID, r.Limit, r.Region, bytes>>20, limitRegion)
	}
	got, err := memlimit.ReadDmemMax(filepath.Join(simCgroupRoot(node), filepath.FromSlash(r.Cgroup)), limitRegion)
	if err != nil {
		t.Fatalf("claim %s: %v", claimUID, err)
	}
	if got != fmt.Sprint(bytes) {
		t.Errorf("cgroup %s: dmem.max of %s is %s, want %d", r.Cgroup, limitRegion, got, bytes)
	}
	return r
}

// hostCgroup is cgroup in this host's memory hierarchy (cgroup v1 here).
func hostCgroup(cg string) string {
	return filepath.Join("/sys/fs/cgroup/memory", filepath.FromSlash(cg))
}

// TestShareMemoryLimitInKernel: a 6Gi share's pod is created by containerd
// and runc with the share's hard limit on the pod's cgroup, set by the hook
// before its container ran, and the claim says so (KernelMemoryLimit). The
// pod's second container, which does not name the claim, is in that cgroup:
// handed the device by the first, it allocates under the same limit. A
// second pod using the same claim is refused by the runtime (the share
// bounds one pod at a time, never twice its memory) with the claim, device
// and holding pod in its status; once the first pod is gone, its limit is
// released and the second pod's container starts with the limit. When
// that pod goes, nothing is left: no record, no cgroup.
func TestShareMemoryLimitInKernel(t *testing.T) {
	ctx := context.Background()
	node := nodes[2].Name
	ns := namespace(t, "")
	t.Cleanup(func() { drain(t, ns) })
	const bytes = 6 << 30
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "share"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu",
			Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: "nvidia.gpu.tessera.dev",
				Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf(
					`device.attributes["resource.kubernetes.io"].pciBusID == %q && device.attributes["gpu.tessera.dev"].memoryIsolation == "kernel"`, limitGPU)}}},
				Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"memory": *resource.NewQuantity(bytes, resource.BinarySI)}},
			},
		}}}},
	}
	c, err := client.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uid := string(c.UID)
	pod := func(name string) *corev1.Pod {
		p := probePod(name, node, "")
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim.Name}}
		return p
	}
	firstPod := pod("first")
	sidecar := firstPod.Spec.Containers[0]
	sidecar.Name, sidecar.Resources = "sidecar", corev1.ResourceRequirements{}
	firstPod.Spec.Containers = append(firstPod.Spec.Containers, sidecar)
	if _, err := client.CoreV1().Pods(ns).Create(ctx, firstPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := scenario.WaitRunning(ctx, client, ns, []string{"first"}, 120*time.Second); err != nil {
		t.Fatal(err)
	}
	first, err := client.CoreV1().Pods(ns).Get(ctx, "first", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkContainer(t, ns, first, first.Spec.Containers[0])
	shareCondition(t, ns, "KernelMemoryLimit")
	held := checkLimit(t, node, uid, first, runningContainer(t, ns, "first", "probe"), bytes)
	// The sidecar did not name the claim: no hook ran for it, and it is no
	// member. It runs in the limited pod's cgroup on this host all the same.
	side := runningContainer(t, ns, "first", "sidecar")
	if !exists(hostCgroup(held.Cgroup + "/" + side)) {
		t.Errorf("the sidecar %s is not in the limited pod cgroup %s (no %s)", side, held.Cgroup, hostCgroup(held.Cgroup+"/"+side))
	}

	// The second pod of the claim: its container is refused at creation
	// while the first holds the share.
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod("second"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var refusal string
	if err := scenario.Poll(ctx, 90*time.Second, func() (bool, string) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "second", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.State.Running != nil {
				t.Fatalf("pod %s/second runs beside %s/first on the same share: the share's memory is held twice", ns, ns)
			}
		}
		// The runtime's error reaches the pod's status (RunContainerError,
		// or the StartError the container terminated with) and an event;
		// in back-off the status shows only CrashLoopBackOff.
		if refusal = hookRefusal(p); refusal != "" {
			return true, ""
		}
		evs, err := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=second"})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if strings.Contains(e.Message, memlimit.HookName+":") {
				refusal = e.Message
				return true, ""
			}
		}
		return false, fmt.Sprintf("pod second: no refusal by the hook yet: %+v", p.Status.ContainerStatuses)
	}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{ns + "/share", uid, held.Device, "held by pod " + string(first.UID)} {
		if !strings.Contains(refusal, want) {
			t.Errorf("the refusal of the second container does not name %q: %s", want, refusal)
		}
	}
	// The refused creations left nothing: the first pod's record is still
	// the one.
	checkLimit(t, node, uid, first, held.Members[0].Container, bytes)

	zero := int64(0)
	if err := client.CoreV1().Pods(ns).Delete(ctx, "first", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	// The kubelet retries the second pod's container, which now gets the
	// share (after the first pod's last member released it).
	if err := scenario.WaitRunning(ctx, client, ns, []string{"second"}, 180*time.Second); err != nil {
		t.Fatal(err)
	}
	second, err := client.CoreV1().Pods(ns).Get(ctx, "second", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := checkLimit(t, node, uid, second, runningContainer(t, ns, "second", "probe"), bytes)
	if d := filepath.Join(simCgroupRoot(node), filepath.FromSlash(held.Cgroup)); exists(d) {
		t.Errorf("the first pod's cgroup %s is still in the simulator's tree after it was deleted", d)
	}

	drain(t, ns)
	if recs := limitRecords(t, node, uid); len(recs) != 0 {
		t.Errorf("claim %s unprepared: memory limit records left: %+v", uid, recs)
	}
	if d := filepath.Join(simCgroupRoot(node), filepath.FromSlash(now.Cgroup)); exists(d) {
		t.Errorf("the second pod's cgroup %s is still in the simulator's tree after it was deleted", d)
	}
}

// TestMemoryLimitHookInstalled: the chart's init container put the hook on
// the node where the runtime runs it, and only the shared node's devices
// are published kernel-isolated (the H100 nodes' machines have no dmem).
func TestMemoryLimitHookInstalled(t *testing.T) {
	for _, n := range nodes {
		hook := filepath.Join(cluster.NodeDir(n.Name), "bin", memlimit.HookName)
		if !exists(hook) {
			t.Errorf("node %s: no hook at %s", n.Name, hook)
		}
		want := "none"
		if n.Name == nodes[2].Name {
			want = "kernel"
		}
		for _, s := range nodeSlicesOf(t, n.Name) {
			for _, d := range s.Spec.Devices {
				a, ok := d.Attributes["memoryIsolation"]
				if !ok || a.StringValue == nil {
					continue
				}
				if n.Sharing == "" && *a.StringValue == "kernel" {
					t.Errorf("node %s: device %s published memoryIsolation=kernel", n.Name, d.Name)
				}
				if n.Sharing != "" && *a.StringValue != want {
					t.Errorf("node %s: device %s published memoryIsolation=%s, want %s", n.Name, d.Name, *a.StringValue, want)
				}
			}
		}
	}
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// nodeSlicesOf are the ResourceSlices of node's pool.
func nodeSlicesOf(t *testing.T, node string) []resourceapi.ResourceSlice {
	t.Helper()
	l, err := client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{FieldSelector: resourceapi.ResourceSliceSelectorNodeName + "=" + node})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) == 0 {
		t.Fatalf("node %s publishes no ResourceSlice", node)
	}
	return l.Items
}

// hookRefusal is the hook's error where the pod's status shows it.
func hookRefusal(p *corev1.Pod) string {
	for _, s := range p.Status.ContainerStatuses {
		for _, msg := range []string{waitingMessage(s.State), waitingMessage(s.LastTerminationState), terminatedMessage(s.State), terminatedMessage(s.LastTerminationState)} {
			if strings.Contains(msg, memlimit.HookName+":") {
				return msg
			}
		}
	}
	return ""
}

func waitingMessage(s corev1.ContainerState) string {
	if s.Waiting != nil {
		return s.Waiting.Message
	}
	return ""
}

func terminatedMessage(s corev1.ContainerState) string {
	if s.Terminated != nil {
		return s.Terminated.Message
	}
	return ""
}
