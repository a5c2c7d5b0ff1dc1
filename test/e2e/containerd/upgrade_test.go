package containerd

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/pkg/checkpoint"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// upgrades counts the upgrades this test made in the cluster.
var upgrades int

// TestUpgradeUnderChurn: `helm upgrade` of the shared node's agent (a flag
// change, so the DaemonSet replaces the agent's pod) while pods holding
// shares of its L4s are created and deleted. No pod fails; the pods that
// ran before keep their containers, their claims stay prepared and their
// MPS daemons (pods of their own) keep running with every client session;
// and the time a new pod takes to run during the upgrade is measured
// against the same churn without one. The churn's pods are probes, each
// holding an MPS session of its own: one whose daemon went away would exit.
func TestUpgradeUnderChurn(t *testing.T) {
	node := nodes[2].Name
	ns := namespace(t, "")
	runScenario(t, ns, "14-gpu-shares-l4.yaml")
	before := preparedClaims(t, ns)
	running := containerIDs(t, ns)
	mps := mpsState(t, ns, node)

	churnNS := namespace(t, "churn")
	shareTemplate(t, churnNS, "share-2gi", "2Gi", `device.attributes["gpu.tessera.dev"].model == "L4"`)
	const pods = 10
	base := churn(t, churnNS, node, "base", pods, nil)

	old := agentPod(t, node)
	var upgradeErr error
	var upgradeTook time.Duration
	upgraded := make(chan struct{})
	during := churn(t, churnNS, node, "upgrade", pods, func() {
		go func() {
			defer close(upgraded)
			start := time.Now()
			// TESSERA_HEALTH_POLL changes: a new pod template (another
			// each time the test runs in this cluster).
			upgrades++
			if upgradeErr = cluster.UpgradeAgent(node, fmt.Sprintf("health.poll=%ds", 30+upgrades)); upgradeErr != nil {
				return
			}
			// Not waitAgent: this is not the test's goroutine.
			upgradeErr = scenario.Poll(context.Background(), 120*time.Second, func() (bool, string) {
				p, msg := readyAgent(node)
				return p != nil && p.UID != old.UID, "waiting for the upgraded agent: " + msg
			})
			upgradeTook = time.Since(start)
		}()
	})
	<-upgraded
	if upgradeErr != nil {
		t.Fatalf("%v\n%s", upgradeErr, rollout(t, node))
	}
	if agentPod(t, node).UID == old.UID {
		t.Fatal("the upgrade did not replace the agent's pod")
	}
	for uid := range before {
		if st, ok := checkpointClaims(t, node)[uid]; !ok || st != checkpoint.PrepareCompleted {
			t.Errorf("after the upgrade: claim %s in checkpoint state %q, want %q", uid, st, checkpoint.PrepareCompleted)
		}
	}
	if after := containerIDs(t, ns); fmt.Sprint(after) != fmt.Sprint(running) {
		t.Errorf("after the upgrade: workload containers changed:\n before %v\n after  %v", running, after)
	}
	mps.same(t, "after the upgrade")
	drain(t, ns)
	b50, b99 := percentiles(base)
	u50, u99 := percentiles(during)
	t.Logf("time to Running, %d pods each: without an upgrade p50 %v p99 %v; during one p50 %v p99 %v (ratio %.2f, %.2f); upgrade to the new agent Ready %v",
		pods, b50, b99, u50, u99, float64(u50)/float64(b50), float64(u99)/float64(b99), upgradeTook)
}

// churn creates n probe pods with a claim of template share-2gi on node,
// one every 300ms, calls mid (if any) after the second, waits for each to
// run and deletes it. Every pod must run; it returns each one's time from
// creation to Running.
func churn(t *testing.T, ns, node, prefix string, n int, mid func()) []time.Duration {
	t.Helper()
	ctx := context.Background()
	var (
		mu    sync.Mutex
		took  []time.Duration
		fails []string
		wg    sync.WaitGroup
	)
	tmpl := "share-2gi"
	for i := range n {
		name := fmt.Sprintf("%s-%d", prefix, i)
		created := time.Now()
		if _, err := client.CoreV1().Pods(ns).Create(ctx, probePod(name, node, tmpl), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, why := untilRunning(ctx, ns, name, created)
			mu.Lock()
			defer mu.Unlock()
			if why != "" {
				fails = append(fails, name+": "+why)
				return
			}
			took = append(took, d)
			zero := int64(0)
			_ = client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}()
		if i == 1 && mid != nil {
			mid()
		}
		time.Sleep(300 * time.Millisecond)
	}
	wg.Wait()
	for _, f := range fails {
		t.Errorf("churn pod %s", f)
	}
	return took
}

// untilRunning polls the pod every 50ms until it runs (its time since
// created) or fails or 180s pass (why not).
func untilRunning(ctx context.Context, ns, name string, created time.Time) (time.Duration, string) {
	deadline := created.Add(180 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err != nil:
			last = err.Error()
		case p.Status.Phase == corev1.PodRunning:
			return time.Since(created), ""
		case p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
			return 0, fmt.Sprintf("phase %s: %s", p.Status.Phase, p.Status.Message)
		default:
			last = string(p.Status.Phase)
			for _, c := range p.Status.ContainerStatuses {
				if w := c.State.Waiting; w != nil {
					last += " " + w.Reason + ": " + w.Message
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 0, "not Running after 180s: " + last
}

// percentiles are the p50 and p99 (nearest rank) of ds.
func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return rank(0.50), rank(0.99)
}

// rollout says where the node's agent DaemonSet's rollout stands: its
// status and each of its pods on the node, for a failure's message.
func rollout(t *testing.T, node string) string {
	t.Helper()
	ctx := context.Background()
	out := ""
	if ds, err := client.AppsV1().DaemonSets(localcluster.AgentNamespace).Get(ctx, localcluster.AgentRelease(node), metav1.GetOptions{}); err == nil {
		out += fmt.Sprintf("DaemonSet %s: generation %d, status %+v\n", ds.Name, ds.Generation, ds.Status)
	}
	l, err := client.CoreV1().Pods(localcluster.AgentNamespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return out + err.Error()
	}
	for _, p := range l.Items {
		if !isAgent(&p) {
			continue
		}
		out += fmt.Sprintf("pod %s (uid %s): phase %s, deleted %v, ready %v, conditions %+v\n", p.Name, p.UID, p.Status.Phase, p.DeletionTimestamp != nil, podReady(&p), p.Status.Conditions)
	}
	return out
}
