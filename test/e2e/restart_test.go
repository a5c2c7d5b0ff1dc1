package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// gpuPod creates a pod on node with its own claim for one whole GPU and
// returns the claim's UID.
func gpuPod(t *testing.T, ns, name, node string) string {
	t.Helper()
	return claimPod(t, ns, name, node, resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.tessera.dev"})
}

// claimPod creates a pod on node with its own claim for one request and
// returns the claim's UID.
func claimPod(t *testing.T, ns, name, node string, req resourceapi.ExactDeviceRequest) string {
	t.Helper()
	ctx := context.Background()
	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu", Exactly: &req,
		}}}},
	}
	c, err := client.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claimName := name
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeSelector:   map[string]string{"kubernetes.io/hostname": node},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claimName}},
			Containers: []corev1.Container{{
				Name: "work", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
			}},
		},
	}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return string(c.UID)
}

// restartPlugin stops a node's plugin, runs whileDown, and starts it again.
func restartPlugin(t *testing.T, node string, whileDown func()) {
	t.Helper()
	s, err := cluster.LoadState()
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.StopPlugin(s, node); err != nil {
		t.Fatal(err)
	}
	if whileDown != nil {
		whileDown()
	}
	if err := cluster.StartPlugin(s, nodeByName(t, node)); err != nil {
		t.Fatal(err)
	}
}

func nodeByName(t *testing.T, name string) localcluster.Node {
	t.Helper()
	for _, n := range nodes {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("no node %s", name)
	return localcluster.Node{}
}

func TestPluginRestartKeepsClaimsPrepared(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	const node = "gpu-h100"
	uid := gpuPod(t, ns, "before", node)
	if err := scenario.WaitRunning(ctx, client, ns, []string{"before"}, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	restartPlugin(t, node, nil)
	if st := checkpointClaims(t, node)[uid]; st != checkpoint.PrepareCompleted || !specExists(node, uid) {
		t.Fatalf("after restart: checkpoint state %q, spec %v", st, specExists(node, uid))
	}
	uid2 := gpuPod(t, ns, "after", node)
	if err := scenario.WaitRunning(ctx, client, ns, []string{"before", "after"}, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	if !specExists(node, uid2) {
		t.Error("new claim after restart has no CDI spec")
	}
	deleteAll(t, ns)
	for _, u := range []string{uid, uid2} {
		if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
			_, held := checkpointClaims(t, node)[u]
			return !held && !specExists(node, u), "still prepared"
		}); err != nil {
			t.Errorf("claim %s: %v", u, err)
		}
	}
}

func TestPodWaitsForPlugin(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	const node = "gpu-mixed"
	var uid string
	restartPlugin(t, node, func() {
		uid = gpuPod(t, ns, "patient", node)
		// While the plugin is down the kubelet cannot prepare the claim:
		// the pod is scheduled (the slices stay published) but does not run.
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			p, err := client.CoreV1().Pods(ns).Get(ctx, "patient", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Status.Phase == corev1.PodRunning {
				t.Fatal("pod ran while its node's plugin was down")
			}
			time.Sleep(time.Second)
		}
	})
	if err := scenario.WaitRunning(ctx, client, ns, []string{"patient"}, 120*time.Second); err != nil {
		t.Fatalf("pod did not run once the plugin returned: %v", err)
	}
	if !specExists(node, uid) {
		t.Error("no CDI spec for the claim")
	}
	deleteAll(t, ns)
}

func deleteAll(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	zero := int64(0)
	if err := client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.ResourceV1().ResourceClaims(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := scenario.Poll(ctx, 90*time.Second, func() (bool, string) {
		p, _ := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		c, _ := client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		return len(p.Items) == 0 && len(c.Items) == 0, fmt.Sprintf("%d pods, %d claims", len(p.Items), len(c.Items))
	}); err != nil {
		t.Fatal(err)
	}
}
