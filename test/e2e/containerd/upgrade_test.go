package containerd

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// upgrades counts the upgrades this test made in the cluster.
var upgrades int

// churnKind is one kind of pod of a churn: a probe on node with a claim of
// template tmpl (in the churn's namespace), or with no tmpl a legacy pod
// asking for nvidia.com/gpu: 1 (DRA extended-resource mapping).
type churnKind struct{ name, node, tmpl string }

// pod is a probe pod of the kind.
func (k churnKind) pod(name string) *corev1.Pod {
	if k.tmpl != "" {
		return probePod(name, k.node, k.tmpl)
	}
	p := probePod(name, k.node, "")
	p.Spec.ResourceClaims = nil
	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}
	return p
}

// churnKinds creates, in ns, the templates of the chaos test's kinds of
// claim on the upgraded nodes: a capacity share of an L4 on the shared
// node, and on the dynamic node 1g.10gb and 3g.40gb slices carved at
// prepare, a whole H100 and a legacy nvidia.com/gpu pod. Only the given
// nodes' kinds are returned.
func churnKinds(t *testing.T, ns string, on ...string) []churnKind {
	t.Helper()
	shared, dynamic := nodes[2].Name, nodes[1].Name
	shareTemplate(t, ns, "share-2gi", "2Gi", `device.attributes["gpu.tessera.dev"].model == "L4"`)
	claimTemplate(t, ns, "mig-1g", "mig.gpu.tessera.dev", `device.attributes["gpu.tessera.dev"].profile == "1g.10gb"`, "")
	claimTemplate(t, ns, "mig-3g", "mig.gpu.tessera.dev", `device.attributes["gpu.tessera.dev"].profile == "3g.40gb"`, "")
	claimTemplate(t, ns, "whole-h100", "nvidia.gpu.tessera.dev", `device.attributes["gpu.tessera.dev"].model == "H100"`, "")
	all := []churnKind{
		{"share", shared, "share-2gi"},
		{"mig1g", dynamic, "mig-1g"},
		{"h100", dynamic, "whole-h100"},
		{"mig3g", dynamic, "mig-3g"},
		{"legacy", dynamic, ""},
	}
	var out []churnKind
	for _, k := range all {
		if slices.Contains(on, k.node) {
			out = append(out, k)
		}
	}
	return out
}

// TestUpgradeUnderChurn: `helm upgrade` of the shared and the dynamic
// node's agents at once (a flag change, so each DaemonSet replaces its
// agent's pod) while pods of the chaos test's kinds on those nodes
// (capacity shares of L4s, MIG slices carved at prepare, whole H100s,
// legacy nvidia.com/gpu pods) are
// created and deleted. No pod fails; the pods that ran before keep their
// containers, their claims stay prepared and their MPS daemons (pods of
// their own) keep running with every client session; and the time a new
// pod takes to run during the upgrade is measured against the same churn
// without one. The churn's pods are probes; one holding a share holds an
// MPS session of its own, and one whose daemon went away would exit.
func TestUpgradeUnderChurn(t *testing.T) {
	shared, dynamic := nodes[2].Name, nodes[1].Name
	ns := namespace(t, "")
	runScenario(t, ns, "14-gpu-shares-l4.yaml")
	runScenario(t, ns, "09-dynamic-mig.yaml")
	before := preparedClaims(t, ns)
	running := containerIDs(t, ns)
	mps := mpsState(t, ns, shared)

	churnNS := namespace(t, "churn")
	kinds := churnKinds(t, churnNS, shared, dynamic)
	const pods = 15
	base := churn(t, churnNS, "base", pods, kinds, nil)

	upgraded := map[string]time.Duration{}
	during := churn(t, churnNS, "upgrade", pods, kinds, func() {
		// TESSERA_HEALTH_POLL changes: a new pod template (another each
		// time the test runs in this cluster).
		upgrades++
		upgraded = rollOut(t, fmt.Sprintf("health.poll=%ds", 30+upgrades), cluster.UpgradeAgent, shared, dynamic)
	})
	for uid := range before {
		if st, ok := checkpointClaims(t, before[uid])[uid]; !ok || st != checkpoint.PrepareCompleted {
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
	t.Logf("time to Running, %d pods each (%d kinds): without an upgrade p50 %v p99 %v; during one p50 %v p99 %v (ratio %.2f, %.2f); upgraded agents Ready after %v",
		pods, len(kinds), b50, b99, u50, u99, float64(u50)/float64(b50), float64(u99)/float64(b99), upgraded)
}

// TestDowngradeUnderChurn: the dynamic node's agent is rolled back to the
// agent of the commit before handovers and MPS daemon pods
// (hack/build-previous-agent.sh: its own chart and image) while slices and
// whole GPUs of that node come and go, then forward again the way
// docs/operating.md says: first without surgeUpgrades (the earlier agent
// takes no lock, so it must be gone before the next one starts), then with
// it. No pod fails, the pods that ran before keep their containers and
// their claims stay prepared through all three, and each one's time to
// Running is measured against the same churn without a rollout.
func TestDowngradeUnderChurn(t *testing.T) {
	prod, err := cluster.ProductionImages()
	if err != nil {
		t.Fatal(err)
	}
	tag := prod[localcluster.AgentImage].Tag
	node := nodes[1].Name
	ns := namespace(t, "")
	runScenario(t, ns, "09-dynamic-mig.yaml")
	before := preparedClaims(t, ns)
	running := containerIDs(t, ns)
	churnNS := namespace(t, "churn")
	kinds := churnKinds(t, churnNS, node)
	const pods = 12
	kept := func(when string) {
		t.Helper()
		for uid := range before {
			if st, ok := checkpointClaims(t, node)[uid]; !ok || st != checkpoint.PrepareCompleted {
				t.Errorf("%s: claim %s in checkpoint state %q, want %q", when, uid, st, checkpoint.PrepareCompleted)
			}
		}
		if after := containerIDs(t, ns); fmt.Sprint(after) != fmt.Sprint(running) {
			t.Errorf("%s: workload containers changed:\n before %v\n after  %v", when, running, after)
		}
	}
	base := churn(t, churnNS, "base", pods, kinds, nil)
	var took [3]map[string]time.Duration
	down := churn(t, churnNS, "down", pods, kinds, func() {
		took[0] = rollOut(t, "", cluster.DowngradeAgent, node)
	})
	if img := agentPod(t, node).Spec.Containers[0].Image; !strings.HasSuffix(img, ":"+localcluster.PreviousImageTag) {
		t.Fatalf("after the downgrade the agent runs %s, want the %s image", img, localcluster.PreviousImageTag)
	}
	kept("after the downgrade")
	back := churn(t, churnNS, "back", pods, kinds, func() {
		took[1] = rollOut(t, "surgeUpgrades=false", func(node string, sets ...string) error {
			return cluster.UpgradeAgent(node, append(sets, "image.tag="+tag, "sim.image.tag="+tag)...)
		}, node)
	})
	kept("after the upgrade back")
	surge := churn(t, churnNS, "surge", pods, kinds, func() {
		took[2] = rollOut(t, "surgeUpgrades=true", cluster.UpgradeAgent, node)
	})
	if img := agentPod(t, node).Spec.Containers[0].Image; !strings.HasSuffix(img, ":"+tag) {
		t.Fatalf("after the upgrade back the agent runs %s, want the %s image", img, tag)
	}
	kept("after surge upgrades are on again")
	drain(t, ns)
	line := func(what string, ds []time.Duration) string {
		p50, p99 := percentiles(ds)
		return fmt.Sprintf("%s p50 %v p99 %v", what, p50, p99)
	}
	t.Logf("time to Running, %d pods each (%d kinds): %s; %s; %s; %s; agent Ready after the downgrade %v, the upgrade back %v, surge on %v",
		pods, len(kinds), line("without a rollout", base), line("downgrade", down), line("upgrade back", back), line("surge on", surge),
		took[0][node], took[1][node], took[2][node])
}

// rollOut runs apply (UpgradeAgent or DowngradeAgent) with set (if any) on
// each node at once, and waits until every node's agent is a new pod and
// Ready; it returns how long each took. It runs beside a churn, off the
// test's goroutine, so it fails the test only through t.Errorf.
func rollOut(t *testing.T, set string, apply func(node string, sets ...string) error, nodes ...string) map[string]time.Duration {
	var sets []string
	if set != "" {
		sets = append(sets, set)
	}
	took := map[string]time.Duration{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, node := range nodes {
		old, msg := readyAgent(node)
		if old == nil {
			t.Errorf("node %s before the rollout: %s", node, msg)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			err := apply(node, sets...)
			if err == nil {
				err = scenario.Poll(context.Background(), 120*time.Second, func() (bool, string) {
					p, msg := readyAgent(node)
					return p != nil && p.UID != old.UID, "waiting for the new agent: " + msg
				})
			}
			if err != nil {
				t.Errorf("node %s: %v\n%s", node, err, rollout(t, node))
				return
			}
			mu.Lock()
			defer mu.Unlock()
			took[node] = time.Since(start)
		}()
	}
	wg.Wait()
	return took
}

// churn creates n probe pods, one every 300ms, of each kind in turn,
// calls mid (if any) after the second, waits for each to run and deletes
// it; mid runs beside the churn, which waits for it. Every pod must run;
// it returns each one's time from creation to Running.
func churn(t *testing.T, ns, prefix string, n int, kinds []churnKind, mid func()) []time.Duration {
	t.Helper()
	ctx := context.Background()
	var (
		mu    sync.Mutex
		took  []time.Duration
		fails []string
		wg    sync.WaitGroup
	)
	midDone := make(chan struct{})
	if mid == nil {
		close(midDone)
	}
	for i := range n {
		k := kinds[i%len(kinds)]
		name := fmt.Sprintf("%s-%s-%d", prefix, k.name, i)
		created := time.Now()
		if _, err := client.CoreV1().Pods(ns).Create(ctx, k.pod(name), metav1.CreateOptions{}); err != nil {
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
			go func() {
				defer close(midDone)
				mid()
			}()
		}
		time.Sleep(300 * time.Millisecond)
	}
	wg.Wait()
	<-midDone
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
