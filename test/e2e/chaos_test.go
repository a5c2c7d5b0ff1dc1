package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// chaosKind is one kind of workload of the churn.
type chaosKind struct {
	name, node string
	// req is the pod's one claim request; nil for a legacy pod asking
	// nvidia.com/gpu: 1 (DRA extended-resource mapping).
	req *resourceapi.ExactDeviceRequest
}

func celRequest(class, expr string) *resourceapi.ExactDeviceRequest {
	return &resourceapi.ExactDeviceRequest{DeviceClassName: class, Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}}
}

var chaosKinds = []chaosKind{
	{"mig1g", dynamicNode, celRequest("mig.gpu.tessera.dev", `device.attributes["gpu.tessera.dev"].profile == "1g.10gb"`)},
	{"mig3g", dynamicNode, celRequest("mig.gpu.tessera.dev", `device.attributes["gpu.tessera.dev"].profile == "3g.40gb"`)},
	{"h100", "gpu-h100", celRequest("nvidia.gpu.tessera.dev", `device.attributes["gpu.tessera.dev"].model == "H100"`)},
	{"mi300x", "gpu-mi300x", &resourceapi.ExactDeviceRequest{DeviceClassName: "amd.gpu.tessera.dev"}},
	{"share", sharedNode, func() *resourceapi.ExactDeviceRequest {
		r := celRequest("nvidia.gpu.tessera.dev", `device.attributes["gpu.tessera.dev"].model == "L4"`)
		r.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("7Gi")}}
		return r
	}()},
	{"legacy", "gpu-h100", nil},
}

// TestChaosUnderChurn keeps pods of every kind (MIG slices carved on
// demand, whole H100s, MI300Xs, capacity shares of L4s, legacy
// nvidia.com/gpu pods) arriving and leaving while the agents of the
// dynamic node and the shared node are SIGKILLed and started again, some
// kills while a claim of that node is recorded mid-prepare, and once the
// dynamic node's kubelet is SIGKILLed and started again. A fixed seed makes the sequence of operations the same
// every run; timing is the machine's. Every pod must run, and afterwards no
// checkpoint entry, CDI spec, partition, MIG mode or MPS daemon of theirs
// may be left. Each crash point on its own is proven by the unit tests
// (claims: every step); this proves the pieces together, against the real
// kubelet's retries.
func TestChaosUnderChurn(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	rng := rand.New(rand.NewSource(17))
	const (
		total    = 30 // pods over the run
		maxAlive = 8  // pods at once
		killEach = 5  // a kill after every killEach pods
	)
	victims := []string{dynamicNode, sharedNode}
	type chaosPod struct{ name, node string }
	var alive []chaosPod
	claimUIDs := map[string][]string{} // node to the UIDs of claims used there
	kills, midPrepare, kubeletKills := 0, 0, 0
	running := func(p chaosPod) {
		t.Helper()
		if err := scenario.WaitRunning(ctx, client, ns, []string{p.name}, 120*time.Second); err != nil {
			t.Fatalf("after %d agent kills: %v", kills, err)
		}
		uid := podClaimUID(t, ns, p.name)
		claimUIDs[p.node] = append(claimUIDs[p.node], uid)
	}
	for i := range total {
		k := chaosKinds[rng.Intn(len(chaosKinds))]
		p := chaosPod{fmt.Sprintf("%s-%02d", k.name, i), k.node}
		if k.req == nil {
			legacyPod(t, ns, p.name, p.node)
		} else {
			claimPod(t, ns, p.name, p.node, *k.req)
		}
		alive = append(alive, p)
		if i%killEach == killEach-1 {
			// The victim whose node just got a pod, if any: its prepare may
			// be in flight.
			v := victims[(i/killEach)%len(victims)]
			if p.node == dynamicNode || p.node == sharedNode {
				v = p.node
				if waitPrepareStarted(t, v, 3*time.Second) {
					midPrepare++
				}
			} else {
				time.Sleep(time.Duration(rng.Intn(200)) * time.Millisecond)
			}
			killAndRestart(t, v)
			kills++
		}
		if i == total/2 {
			// Once, the dynamic node's kubelet crashes and comes back: it
			// prepares its running pods' claims again (each must be
			// idempotent) and goes on.
			s, err := cluster.LoadState()
			if err != nil {
				t.Fatal(err)
			}
			if err := cluster.RestartKubelet(s, dynamicNode); err != nil {
				t.Fatal(err)
			}
			kubeletKills++
		}
		for len(alive) > maxAlive {
			old := alive[0]
			alive = alive[1:]
			running(old)
			zero := int64(0)
			if err := client.CoreV1().Pods(ns).Delete(ctx, old.name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, p := range alive {
		running(p)
	}
	t.Logf("%d pods ran through %d agent kills (%d of them with a claim recorded PrepareStarted) and %d kubelet kill", total, kills, midPrepare, kubeletKills)
	deleteAll(t, ns)

	for node, uids := range claimUIDs {
		for _, uid := range uids {
			if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
				_, held := checkpointClaims(t, node)[uid]
				return !held && !specExists(node, uid), "still prepared"
			}); err != nil {
				t.Errorf("claim %s on %s: %v", uid, node, err)
			}
		}
	}
	st := simState(t, dynamicNode)
	if len(st.partitions) != 0 {
		t.Errorf("partitions left on %s: %+v", dynamicNode, st.partitions)
	}
	for gpu, on := range st.migOn {
		if on {
			t.Errorf("GPU %s on %s left in MIG mode", gpu, dynamicNode)
		}
	}
	if left, _ := os.ReadDir(filepath.Join(simDir(sharedNode), "mps")); len(left) != 0 {
		t.Errorf("MPS daemon directories left on %s: %v", sharedNode, left)
	}
}

// killAndRestart SIGKILLs a node's agent and starts it again at once, as a
// crash-looping DaemonSet pod would be.
func killAndRestart(t *testing.T, node string) {
	t.Helper()
	s, err := cluster.LoadState()
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.KillPlugin(s, node); err != nil {
		t.Fatal(err)
	}
	if err := cluster.StartPlugin(s, nodeByName(t, node)); err != nil {
		t.Fatal(err)
	}
}

// waitPrepareStarted polls a node's checkpoint until a claim is recorded
// mid-prepare (PrepareStarted), so a kill then lands inside a prepare; it
// gives up after d. Whether it catches one is timing: the test asserts
// nothing on it, the unit tests stop at every step deterministically.
func waitPrepareStarted(t *testing.T, node string, d time.Duration) bool {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		cp, err := checkpoint.Read(cluster.CheckpointPath(node))
		if err != nil {
			continue // caught between write and rename: read again
		}
		for _, c := range cp.Claims {
			if c.State == checkpoint.PrepareStarted {
				return true
			}
		}
	}
	return false
}

// legacyPod creates a pod on node asking nvidia.com/gpu: 1, which the
// scheduler serves through a claim of its own (extended-resource mapping).
func legacyPod(t *testing.T, ns, name, node string) {
	t.Helper()
	one := resource.MustParse("1")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"kubernetes.io/hostname": node},
			Containers: []corev1.Container{{
				Name: "work", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": one}},
			}},
		},
	}
	if _, err := client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// podClaimUID is the UID of the claim a running pod uses: its own, or the
// one the scheduler made for its extended resources.
func podClaimUID(t *testing.T, ns, pod string) string {
	t.Helper()
	ctx := context.Background()
	p, err := client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	name := ""
	switch {
	case len(p.Spec.ResourceClaims) > 0 && p.Spec.ResourceClaims[0].ResourceClaimName != nil:
		name = *p.Spec.ResourceClaims[0].ResourceClaimName
	case p.Status.ExtendedResourceClaimStatus != nil:
		name = p.Status.ExtendedResourceClaimStatus.ResourceClaimName
	default:
		t.Fatalf("pod %s has no claim", pod)
	}
	c, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(c.UID)
}
