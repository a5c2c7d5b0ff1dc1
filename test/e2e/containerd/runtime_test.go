package containerd

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/mps"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/helmchart"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// TestAgentsRunFromTheChart: on every node the agent is the pod of its
// release's DaemonSet, running the imported image with exactly the
// security context the chart renders for its values (backend sim: no
// privilege, every capability dropped but MKNOD, RuntimeDefault seccomp),
// Ready only with the node's pool published (its readiness probe is
// /readyz), and its writes pass the node-scoped admission policy with its
// own token. Its simulated GPUs' device nodes are real character devices:
// MKNOD is in effect under that context.
func TestAgentsRunFromTheChart(t *testing.T) {
	ch, err := helmchart.ForRepo(repo)
	if err != nil {
		t.Fatal(err)
	}
	// The package the releases were installed from, not the chart's
	// directory.
	if ch.Dir, err = cluster.ChartPackage(); err != nil {
		t.Fatal(err)
	}
	prod, err := cluster.ProductionImages()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		objs, err := ch.RenderValues(localcluster.AgentRelease(n.Name), localcluster.AgentNamespace, filepath.Join(cluster.NodeDir(n.Name), "agent-values.json"))
		if err != nil {
			t.Fatal(err)
		}
		var ds appsv1.DaemonSet
		if err := helmchart.Convert(helmchart.Find(objs, "DaemonSet", localcluster.AgentRelease(n.Name))[0], &ds); err != nil {
			t.Fatal(err)
		}
		rendered := ds.Spec.Template.Spec.Containers[0].SecurityContext
		p := agentPod(t, n.Name)
		if owner := metav1.GetControllerOf(p); owner == nil || owner.Kind != "DaemonSet" || owner.Name != localcluster.AgentRelease(n.Name) {
			t.Errorf("node %s: agent pod %s is controlled by %v, want DaemonSet %s", n.Name, p.Name, owner, localcluster.AgentRelease(n.Name))
		}
		c := p.Spec.Containers[0]
		// The values set only the repositories: the tag is the packaged
		// chart's appVersion, which must be the imported images'.
		if want := prod[localcluster.AgentSimImage].Ref; c.Image != want {
			t.Errorf("node %s: agent image %s, want %s (make images' sim image, tagged as the chart package's appVersion)", n.Name, c.Image, want)
		}
		if !equality.Semantic.DeepEqual(c.SecurityContext, rendered) {
			t.Errorf("node %s: agent security context %+v, the chart renders %+v", n.Name, c.SecurityContext, rendered)
		}
		if sc := c.SecurityContext; sc == nil || sc.Privileged == nil || *sc.Privileged || sc.Capabilities == nil ||
			!reflect.DeepEqual(sc.Capabilities.Add, []corev1.Capability{"MKNOD"}) || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
			sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("node %s: agent security context %+v, want unprivileged, capabilities MKNOD only, RuntimeDefault seccomp", n.Name, sc)
		}
		checkDeviceNodes(t, n.Name)
		if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("node %s: agent readiness probe %+v, want GET /readyz", n.Name, c.ReadinessProbe)
		}
		if ok, msg := localcluster.PoolPublished(context.Background(), client, n.Name); !ok {
			t.Errorf("node %s: agent pod Ready but pool not published: %s", n.Name, msg)
		}
		if p.Spec.ServiceAccountName != localcluster.AgentRelease(n.Name) {
			t.Errorf("node %s: agent runs as service account %s", n.Name, p.Spec.ServiceAccountName)
		}
	}
}

// checkDeviceNodes: the node's simulated device tree holds character
// devices only; an agent without MKNOD would have left empty regular files.
func checkDeviceNodes(t *testing.T, node string) {
	t.Helper()
	root := filepath.Join(cluster.SimStateDir(node), "dev")
	chars, others := 0, []string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if d.Type()&fs.ModeCharDevice != 0 {
			chars++
		} else {
			others = append(others, p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("node %s: %v", node, err)
	}
	if chars == 0 || len(others) > 0 {
		t.Errorf("node %s: %d character devices under %s, and not devices: %v", node, chars, root, others)
	}
}

// TestScenariosInContainers runs demo scenarios with the probe image: every
// pod Running, every container's devices, environment and mounts those of
// its claims' CDI specs; deleting the pods unprepares their claims.
func TestScenariosInContainers(t *testing.T) {
	for _, name := range []string{
		"01-legacy-nvidia-gpu.yaml", // extended resource nvidia.com/gpu
		"02-an-h100.yaml",
		"09-dynamic-mig.yaml",   // partitions carved at prepare
		"14-gpu-shares-l4.yaml", // shares under each L4's MPS daemon
	} {
		t.Run(strings.TrimSuffix(name, ".yaml"), func(t *testing.T) {
			ns := namespace(t, "")
			sc := runScenario(t, ns, name)
			claims := preparedClaims(t, ns)
			if t.Failed() {
				return
			}
			if err := sc.Delete(context.Background(), client, ns, 90*time.Second); err != nil {
				t.Fatal(err)
			}
			waitUnprepared(t, claims)
		})
	}
}

// runScenario applies a demo file with the probe image, waits for its pods
// to run and checks each container.
func runScenario(t *testing.T, ns, name string) *scenario.Scenario {
	t.Helper()
	ctx := context.Background()
	sc, err := scenario.Load(scenarioPath(name))
	if err != nil {
		t.Fatal(err)
	}
	sc.UseImage(localcluster.ProbeImage)
	if err := sc.Apply(ctx, client, ns); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range sc.Pods {
		names = append(names, p.Name)
	}
	if err := scenario.WaitRunning(ctx, client, ns, names, 120*time.Second); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for _, n := range names {
		p, err := client.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range p.Spec.Containers {
			checkContainer(t, ns, p, c)
		}
	}
	return sc
}

// TestAgentRestarts: a node's agent process is killed (the kubelet
// restarts its container), then its pod is deleted (the DaemonSet makes a
// new one). Each time the running pods keep their containers, their claims
// stay prepared, and the new agent prepares a new claim. On the dynamic
// node the carved partitions are at stake; on the shared node the MPS
// daemons, which run as pods of their own: each must be the same daemon
// after (same pod UID, same stand-in instance), with every probe's client
// session still connected (a probe whose daemon went away exits, and its
// container's restart fails the comparison of container IDs).
func TestAgentRestarts(t *testing.T) {
	for _, tc := range []struct {
		node, scenario string
	}{
		{nodes[1].Name, "09-dynamic-mig.yaml"},
		{nodes[2].Name, "14-gpu-shares-l4.yaml"},
	} {
		t.Run(tc.node, func(t *testing.T) { agentRestarts(t, tc.node, tc.scenario) })
	}
}

func agentRestarts(t *testing.T, node, file string) {
	ns := namespace(t, "")
	runScenario(t, ns, file)
	before := preparedClaims(t, ns)
	for uid, n := range before {
		if n != node {
			t.Fatalf("claim %s prepared on %s, want %s", uid, n, node)
		}
	}
	running := containerIDs(t, ns)
	mps := mpsState(t, ns, node)
	if strings.Contains(file, "shares") && len(mps.daemons) == 0 {
		t.Fatalf("%s: no container mounts an MPS daemon's pipes", file)
	}
	check := func(when string) {
		t.Helper()
		for uid := range before {
			if st, ok := checkpointClaims(t, node)[uid]; !ok || st != checkpoint.PrepareCompleted {
				t.Errorf("%s: claim %s in checkpoint state %q, want %q", when, uid, st, checkpoint.PrepareCompleted)
			}
			if !specExists(node, uid) {
				t.Errorf("%s: claim %s has no CDI spec", when, uid)
			}
		}
		if after := containerIDs(t, ns); fmt.Sprint(after) != fmt.Sprint(running) {
			t.Errorf("%s: workload containers changed:\n before %v\n after  %v", when, running, after)
		}
		mps.same(t, when)
	}

	check("before")
	old := agentPod(t, node)
	killAgent(t, node)
	waitAgent(t, node, func(p *corev1.Pod) bool {
		return p.UID == old.UID && p.Status.ContainerStatuses[0].RestartCount > 0
	}, "its container restarted")
	check("after the agent's container was killed")

	second := agentPod(t, node)
	zero := int64(0)
	if err := client.CoreV1().Pods(localcluster.AgentNamespace).Delete(context.Background(), second.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	waitAgent(t, node, func(p *corev1.Pod) bool { return p.UID != second.UID }, "a new pod")
	check("after the agent's pod was replaced")

	// The new agent serves: one more claim, on this node.
	more := namespace(t, "more")
	runOnNode(t, more, node)
	drain(t, ns)
	drain(t, more)
}

// runOnNode runs a probe pod on node with a claim of one whole GPU and
// checks its container.
func runOnNode(t *testing.T, ns, node string) {
	t.Helper()
	ctx := context.Background()
	tmpl := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "one-gpu"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.tessera.dev"}}},
		}}},
	}
	if _, err := client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := probePod("probe", node, tmpl.Name)
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := scenario.WaitRunning(ctx, client, ns, []string{pod.Name}, 120*time.Second); err != nil {
		t.Fatal(err)
	}
	p, err := client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkContainer(t, ns, p, p.Spec.Containers[0])
}

// mpsPipes are the host directories of the MPS daemons the namespace's
// running containers use (the CDI mount at the container's pipe path).
func mpsPipes(t *testing.T, ns string) []string {
	t.Helper()
	l, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	for i := range l.Items {
		p := &l.Items[i]
		for _, c := range p.Spec.Containers {
			for _, ref := range c.Resources.Claims {
				w := claimWants(t, p.Spec.NodeName, claimUID(t, ns, p, ref.Name))
				if src := w.sources[mps.ContainerPipeDir]; src != "" && !seen[src] {
					seen[src] = true
					out = append(out, src)
				}
			}
		}
	}
	return out
}

// waitUnprepared waits until the kubelet has unprepared every claim (UID
// to node): out of the node's checkpoint and its CDI spec removed.
func waitUnprepared(t *testing.T, claims map[string]string) {
	t.Helper()
	err := scenario.Poll(context.Background(), 60*time.Second, func() (bool, string) {
		for uid, node := range claims {
			if _, ok := checkpointClaims(t, node)[uid]; ok {
				return false, fmt.Sprintf("claim %s still in node %s's checkpoint", uid, node)
			}
			if specExists(node, uid) {
				return false, fmt.Sprintf("claim %s: CDI spec still on node %s", uid, node)
			}
		}
		return true, ""
	})
	if err != nil {
		t.Errorf("after the pods were deleted: %v", err)
	}
}

func agentPod(t *testing.T, node string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	if err := scenario.Poll(context.Background(), 60*time.Second, func() (bool, string) {
		p, msg := readyAgent(node)
		pod = p
		return p != nil, msg
	}); err != nil {
		t.Fatalf("node %s: %v", node, err)
	}
	return pod
}

// isAgent: a pod of an agent DaemonSet (the namespace also holds the
// webhook's pods).
func isAgent(p *corev1.Pod) bool {
	o := metav1.GetControllerOf(p)
	return o != nil && o.Kind == "DaemonSet"
}

// readyAgent is the node's one Ready agent pod, or nil and why not.
func readyAgent(node string) (*corev1.Pod, string) {
	l, err := client.CoreV1().Pods(localcluster.AgentNamespace).List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, err.Error()
	}
	var live []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil && isAgent(&p) {
			live = append(live, p)
		}
	}
	if len(live) != 1 {
		return nil, fmt.Sprintf("%d agent pods", len(live))
	}
	if p := &live[0]; podReady(p) {
		return p, ""
	}
	return nil, "agent pod " + live[0].Name + " not Ready"
}

// waitAgent waits for the node's agent pod to be Ready and match, and
// checks that a Ready agent means a published pool all along.
func waitAgent(t *testing.T, node string, match func(*corev1.Pod) bool, what string) {
	t.Helper()
	ctx := context.Background()
	if err := scenario.Poll(ctx, 120*time.Second, func() (bool, string) {
		p, msg := readyAgent(node)
		if p == nil {
			return false, msg
		}
		if ok, msg := localcluster.PoolPublished(ctx, client, node); !ok {
			t.Errorf("node %s: agent pod %s Ready while its pool is not published: %s", node, p.Name, msg)
		}
		return match(p), "waiting for " + what
	}); err != nil {
		t.Fatalf("node %s: %v", node, err)
	}
}

// killAgent SIGKILLs the node's agent process, found by what the kubelet
// gave its container: NODE_NAME in its environment.
func killAgent(t *testing.T, node string) {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		cmd, err := os.ReadFile(filepath.Join(p, "cmdline"))
		if err != nil || !strings.HasPrefix(string(cmd), "/usr/bin/tessera-kubelet-plugin\x00") {
			continue
		}
		env, _ := os.ReadFile(filepath.Join(p, "environ"))
		if !strings.Contains("\x00"+string(env), "\x00NODE_NAME="+node+"\x00") {
			continue
		}
		var pid int
		fmt.Sscan(filepath.Base(p), &pid)
		if err := killPid(pid); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("node %s: no agent process", node)
}

// preparedClaims maps the UIDs of the namespace's allocated claims to
// their nodes.
func preparedClaims(t *testing.T, ns string) map[string]string {
	t.Helper()
	l, err := client.ResourceV1().ResourceClaims(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range l.Items {
		if a := c.Status.Allocation; a != nil && len(a.Devices.Results) > 0 {
			out[string(c.UID)] = a.Devices.Results[0].Pool
		}
	}
	if len(out) == 0 {
		t.Fatalf("namespace %s has no allocated claim", ns)
	}
	return out
}

// containerIDs are the namespace's running containers, by pod.
func containerIDs(t *testing.T, ns string) map[string][]string {
	t.Helper()
	l, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, p := range l.Items {
		for _, c := range p.Status.ContainerStatuses {
			out[p.Name] = append(out[p.Name], c.ContainerID)
		}
	}
	return out
}
