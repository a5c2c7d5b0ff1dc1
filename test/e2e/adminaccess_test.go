package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/e2eutil"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// monitorNode is the node the monitor watches: whole H100s.
const monitorNode = "gpu-h100"

// TestAdminAccessMonitor: a monitor's claim (adminAccess, every whole GPU
// of the node) in a namespace labelled for admin access gets every GPU of
// the node while a workload holds one, and its container their nodes; a
// workload started while the monitor runs is prepared beside it; the
// monitor's unprepare leaves the workloads' claims prepared. Outside such
// a namespace the API server refuses the claim.
func TestAdminAccessMonitor(t *testing.T) {
	t.Run("sees-every-gpu", func(t *testing.T) {
		ctx := context.Background()
		ns := namespace(t)
		// Namespaces stay after a test; its pods must not hold GPUs the next tests need.
		t.Cleanup(func() { deleteAll(t, ns) })
		if err := scenario.AllowAdminAccess(ctx, client, ns); err != nil {
			t.Fatal(err)
		}
		workUID := gpuPod(t, ns, "work", monitorNode)
		if err := scenario.WaitRunning(ctx, client, ns, []string{"work"}, 120*time.Second); err != nil {
			t.Fatal(err)
		}
		monUID := monitorPod(t, ctx, ns, "monitor", monitorNode)
		if err := scenario.WaitRunning(ctx, client, ns, []string{"monitor"}, 120*time.Second); err != nil {
			t.Fatal(err)
		}
		// A workload that comes after the monitor is not refused for it.
		work2UID := gpuPod(t, ns, "work-2", monitorNode)
		if err := scenario.WaitRunning(ctx, client, ns, []string{"work-2"}, 120*time.Second); err != nil {
			t.Fatal(err)
		}

		var whole []string
		for _, s := range nodeSlices(t, monitorNode) {
			for _, d := range s.Spec.Devices {
				if str(d, "type") == "gpu" {
					whole = append(whole, d.Name)
				}
			}
		}
		mc, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, "monitor", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var watched []string
		for _, r := range mc.Status.Allocation.Devices.Results {
			if r.AdminAccess == nil || !*r.AdminAccess {
				t.Errorf("monitor's device %s allocated without admin access", r.Device)
			}
			watched = append(watched, r.Device)
		}
		slices.Sort(whole)
		slices.Sort(watched)
		if !slices.Equal(watched, whole) {
			t.Errorf("monitor watches %v, want every whole GPU of %s: %v", watched, monitorNode, whole)
		}
		for _, w := range []string{"work", "work-2"} {
			if d := allocatedDevice(t, ns, w); !slices.Contains(watched, d) {
				t.Errorf("the monitor does not watch %s's %s", w, d)
			}
		}
		mon := container(t, ns, "monitor")
		for _, w := range []string{"work", "work-2"} {
			for _, p := range container(t, ns, w).DevicePaths() {
				if !slices.Contains(mon.DevicePaths(), p) {
					t.Errorf("the monitor's container lacks %s of %s's (it has %v)", p, w, mon.DevicePaths())
				}
			}
		}
		states := checkpointClaims(t, monitorNode)
		for _, uid := range []string{workUID, work2UID, monUID} {
			if states[uid] != checkpoint.PrepareCompleted {
				t.Errorf("claim %s on %s: %q, want PrepareCompleted", uid, monitorNode, states[uid])
			}
		}

		// The monitor goes; the workloads' claims stay as they were.
		if err := client.CoreV1().Pods(ns).Delete(ctx, "monitor", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
		if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
			_, held := checkpointClaims(t, monitorNode)[monUID]
			return !held && !specExists(monitorNode, monUID), "the monitor's claim is still prepared"
		}); err != nil {
			t.Fatal(err)
		}
		states = checkpointClaims(t, monitorNode)
		for _, uid := range []string{workUID, work2UID} {
			if states[uid] != checkpoint.PrepareCompleted || !specExists(monitorNode, uid) {
				t.Errorf("workload claim %s after the monitor's unprepare: %q, spec %v", uid, states[uid], specExists(monitorNode, uid))
			}
		}
	})

	t.Run("refused-outside-admin-namespace", func(t *testing.T) {
		ctx := context.Background()
		ns := e2eutil.Namespace(t, client, "plain")
		// Namespaces stay after a test; its pods must not hold GPUs the next tests need.
		t.Cleanup(func() { deleteAll(t, ns) })
		_, err := client.ResourceV1().ResourceClaims(ns).Create(ctx, monitorClaim("monitor"), metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), "admin-access") {
			t.Errorf("an admin-access claim in namespace %s without %s: err %v, want the API server's refusal", ns, scenario.AdminAccessLabel, err)
		}
	})
}

// monitorClaim asks every whole GPU of a node with admin access.
func monitorClaim(name string) *resourceapi.ResourceClaim {
	yes := true
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpus", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: "gpu.tessera.dev", AllocationMode: resourceapi.DeviceAllocationModeAll, AdminAccess: &yes,
			},
		}}}},
	}
}

// monitorPod creates a monitor's claim and a pod of it on node, and
// returns the claim's UID.
func monitorPod(t *testing.T, ctx context.Context, ns, name, node string) string {
	t.Helper()
	c, err := client.ResourceV1().ResourceClaims(ns).Create(ctx, monitorClaim(name), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claimName := name
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeSelector:   map[string]string{"kubernetes.io/hostname": node},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: &claimName}},
			Containers: []corev1.Container{{
				Name: "work", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpus"}}},
			}},
		},
	}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return string(c.UID)
}

// checkMonitor (demo/20-gpu-monitor.yaml): the monitor watches every
// whole GPU of gpu-h100, the trainer's two among them.
func checkMonitor(t *testing.T, pods map[string]got) {
	mon, tr := pods["gpu-monitor"], pods["trainer"]
	whole := 0
	for _, s := range nodeSlices(t, monitorNode) {
		for _, d := range s.Spec.Devices {
			if str(d, "type") == "gpu" {
				whole++
			}
		}
	}
	expectDevices(t, mon, whole, func(d resourceapi.Device) bool { return str(d, "type") == "gpu" && str(d, "model") == "H100" })
	expectDevices(t, tr, 2, func(d resourceapi.Device) bool { return str(d, "model") == "H100" })
	if mon.placement.Node != monitorNode || tr.placement.Node != monitorNode {
		t.Errorf("monitor on %s, trainer on %s, want both on %s", mon.placement.Node, tr.placement.Node, monitorNode)
	}
	for _, d := range tr.devices {
		if !slices.ContainsFunc(mon.devices, func(m resourceapi.Device) bool { return m.Name == d.Name }) {
			t.Errorf("the monitor does not watch the trainer's %s", d.Name)
		}
	}
}
