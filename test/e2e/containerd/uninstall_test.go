package containerd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/cdi"
	"github.com/tessera-gpu/tessera/internal/sim"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// TestUninstallLeavesNothing: with the demo's kinds of claims in use (a
// whole H100, a MIG slice carved at prepare, an MPS capacity share of an
// L4), `helm uninstall` refuses, says which claims hold it, and deletes
// nothing; once their pods are gone it removes every release and leaves no
// Tessera pod (agents, MPS daemons, the uninstall's own), no object of the
// releases, no ResourceSlice, and on every node no CDI spec of Tessera's,
// memory limit hook, checkpoint, plugin directory or socket, MPS directory
// or memory limit records, and no simulated partition. The releases are
// installed again after, for the tests that follow.
func TestUninstallLeavesNothing(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "uninstall")
	whole, dynamic, shared := nodes[0].Name, nodes[1].Name, nodes[2].Name
	claimTemplate(t, ns, "whole-h100", "nvidia.gpu.tessera.dev", `device.attributes["gpu.tessera.dev"].model == "H100"`, "")
	claimTemplate(t, ns, "mig-1g", "mig.gpu.tessera.dev", `device.attributes["gpu.tessera.dev"].profile == "1g.10gb"`, "")
	shareTemplate(t, ns, "share-2gi", "2Gi", `device.attributes["gpu.tessera.dev"].model == "L4"`)
	for _, p := range []*corev1.Pod{probePod("whole", whole, "whole-h100"), probePod("mig", dynamic, "mig-1g"), probePod("share", shared, "share-2gi")} {
		if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitPodsRunning(t, ns, 3)
	if n := partitions(t, dynamic); n == 0 {
		t.Fatalf("node %s: no simulated partition while the MIG slice's pod runs", dynamic)
	}
	// What must go is there first (else its absence after proves nothing):
	// on every node with a pod a claim's CDI spec, the plugin directory
	// and the hook; on the shared node the MPS daemons' directory.
	for _, n := range nodes[:3] {
		on := leftOnNode(t, n.Name)
		want := []string{".json", "/plugins/gpu.tessera.dev", "/bin/tessera-cdi-hook"}
		if n.Name == shared {
			want = append(want, "/mps")
		}
		for _, w := range want {
			if !slices.ContainsFunc(on, func(p string) bool { return strings.HasSuffix(p, w) }) {
				t.Fatalf("node %s: before uninstall no path ending %s among Tessera's: %q", n.Name, w, on)
			}
		}
	}
	t.Cleanup(func() { reinstall(t) })

	// Refused while the claims are in use: the release stays whole.
	out, err := cluster.UninstallAgent(whole, 3*time.Minute)
	if err == nil {
		t.Fatalf("uninstall with a claim in use on %s succeeded:\n%s", whole, out)
	}
	if log := checkJobLog(t); !strings.Contains(log, "uninstall refused") || !strings.Contains(log, ns+"/whole-gpu-") {
		t.Errorf("the check's log does not name the claim in use:\n%s", log)
	}
	if _, err := client.AppsV1().DaemonSets(localcluster.AgentNamespace).Get(ctx, localcluster.AgentRelease(whole), metav1.GetOptions{}); err != nil {
		t.Fatalf("after the refused uninstall the agent's DaemonSet: %v", err)
	}
	drain(t, ns)
	for _, n := range nodes {
		if out, err := cluster.UninstallAgent(n.Name, 5*time.Minute); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) { return leftInCluster(ctx) }); err != nil {
		t.Errorf("after uninstall: %v", err)
	}
	for _, n := range nodes {
		for _, p := range leftOnNode(t, n.Name) {
			t.Errorf("node %s: after uninstall %s is left", n.Name, p)
		}
		if got := partitions(t, n.Name); got != 0 {
			t.Errorf("node %s: %d simulated partitions left", n.Name, got)
		}
	}
}

// waitPodsRunning waits until n pods of ns run.
func waitPodsRunning(t *testing.T, ns string, n int) {
	t.Helper()
	if err := scenario.Poll(context.Background(), 120*time.Second, func() (bool, string) {
		l, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, p := range l.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == n, fmt.Sprintf("%d of %d pods running", running, n)
	}); err != nil {
		t.Fatal(err)
	}
}

// checkJobLog is the log of the uninstall check Job's pod, which a refusal
// leaves for the operator to read.
func checkJobLog(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	pods, err := client.CoreV1().Pods(localcluster.AgentNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=uninstall-check"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("the uninstall check's pod: %v (%d pods)", err, len(pods.Items))
	}
	b, err := client.CoreV1().Pods(localcluster.AgentNamespace).GetLogs(pods.Items[0].Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("the uninstall check's log: %v", err)
	}
	return string(b)
}

// leftInCluster: what of Tessera is still in the API: a pod in the agents'
// namespace, an object of a release (its instance label), a
// ResourceSlice of the driver.
func leftInCluster(ctx context.Context) (bool, string) {
	var left []string
	pods, err := client.CoreV1().Pods(localcluster.AgentNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	for _, p := range pods.Items {
		left = append(left, "pod "+p.Name)
	}
	for _, n := range nodes {
		sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + localcluster.AgentRelease(n.Name)}
		for kind, list := range map[string]func() (int, error){
			"DaemonSet": func() (int, error) {
				l, err := client.AppsV1().DaemonSets("").List(ctx, sel)
				return count(len(l.Items), err)
			},
			"Deployment": func() (int, error) {
				l, err := client.AppsV1().Deployments("").List(ctx, sel)
				return count(len(l.Items), err)
			},
			"Job": func() (int, error) {
				l, err := client.BatchV1().Jobs("").List(ctx, sel)
				return count(len(l.Items), err)
			},
			"Service": func() (int, error) {
				l, err := client.CoreV1().Services("").List(ctx, sel)
				return count(len(l.Items), err)
			},
			"ServiceAccount": func() (int, error) {
				l, err := client.CoreV1().ServiceAccounts("").List(ctx, sel)
				return count(len(l.Items), err)
			},
			"Secret": func() (int, error) {
				l, err := client.CoreV1().Secrets("").List(ctx, sel)
				return count(len(l.Items), err)
			},
			"ConfigMap": func() (int, error) {
				l, err := client.CoreV1().ConfigMaps("").List(ctx, sel)
				return count(len(l.Items), err)
			},
			"Role": func() (int, error) {
				l, err := client.RbacV1().Roles("").List(ctx, sel)
				return count(len(l.Items), err)
			},
			"RoleBinding": func() (int, error) {
				l, err := client.RbacV1().RoleBindings("").List(ctx, sel)
				return count(len(l.Items), err)
			},
			"ClusterRole": func() (int, error) {
				l, err := client.RbacV1().ClusterRoles().List(ctx, sel)
				return count(len(l.Items), err)
			},
			"ClusterRoleBinding": func() (int, error) {
				l, err := client.RbacV1().ClusterRoleBindings().List(ctx, sel)
				return count(len(l.Items), err)
			},
			"ValidatingAdmissionPolicy": func() (int, error) {
				l, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, sel)
				return count(len(l.Items), err)
			},
			"ValidatingAdmissionPolicyBinding": func() (int, error) {
				l, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().List(ctx, sel)
				return count(len(l.Items), err)
			},
			"ValidatingWebhookConfiguration": func() (int, error) {
				l, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, sel)
				return count(len(l.Items), err)
			},
		} {
			k, err := list()
			if err != nil {
				return false, fmt.Sprintf("list %s: %v", kind, err)
			}
			if k > 0 {
				left = append(left, fmt.Sprintf("%d %s of release %s", k, kind, localcluster.AgentRelease(n.Name)))
			}
		}
		rs, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
		if err != nil {
			return false, err.Error()
		}
		if k := len(rs.Items); k > 0 {
			left = append(left, fmt.Sprintf("%d ResourceSlices of node %s", k, n.Name))
		}
	}
	// A domain's IMEX channel pool names no node (the kubelets remove only
	// their nodes' slices).
	rs, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=gpu.tessera.dev"})
	if err != nil {
		return false, err.Error()
	}
	for _, s := range rs.Items {
		if s.Spec.NodeName == nil || *s.Spec.NodeName == "" {
			left = append(left, "ResourceSlice "+s.Name+" of pool "+s.Spec.Pool.Name)
		}
	}
	return len(left) == 0, strings.Join(left, ", ")
}

// count is n, or err. (A typed client's List returns an empty list, not
// nil, with its error.)
func count(n int, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	return n, nil
}

// leftOnNode lists the host paths of Tessera's still on node.
func leftOnNode(t *testing.T, node string) []string {
	t.Helper()
	var left []string
	owned, err := cdi.OwnedPaths(cluster.CDIDir(node))
	if err != nil {
		t.Fatal(err)
	}
	left = append(left, owned...)
	kubelet := cluster.KubeletRoot(node)
	for _, p := range []string{
		filepath.Join(kubelet, "plugins", "gpu.tessera.dev"),
		filepath.Join(cluster.NodeDir(node), "bin", "tessera-cdi-hook"),
		sim.MPSRoot(cluster.SimStateDir(node)),
		filepath.Join(cluster.SimStateDir(node), "memory-limits"),
	} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			left = append(left, p)
		}
	}
	sockets, err := filepath.Glob(filepath.Join(kubelet, "plugins_registry", "gpu.tessera.dev*"))
	if err != nil {
		t.Fatal(err)
	}
	return append(left, sockets...)
}

// partitions counts the simulated MIG partitions of node's GPUs.
func partitions(t *testing.T, node string) int {
	t.Helper()
	gpus, err := sim.ReadState(cluster.SimStateDir(node))
	if err != nil {
		t.Fatalf("node %s: simulator state: %v", node, err)
	}
	n := 0
	for _, g := range gpus {
		n += len(g.Partitions)
	}
	return n
}

// reinstall installs every node's release again and waits for its agent.
func reinstall(t *testing.T) {
	for _, n := range nodes {
		if _, err := client.AppsV1().DaemonSets(localcluster.AgentNamespace).Get(context.Background(), localcluster.AgentRelease(n.Name), metav1.GetOptions{}); err == nil {
			continue // never uninstalled
		}
		if err := cluster.ReinstallAgent(n.Name); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		agentPod(t, n.Name)
	}
}
