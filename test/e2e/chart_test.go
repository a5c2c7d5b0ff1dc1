package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/daemonpods"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/helmchart"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/imexdaemonpods"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/nodelabels"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

const (
	chartNS    = "tessera-system"
	chartSA    = "tessera" // the chart's ServiceAccount for release "tessera"
	policyName = "tessera-node-slices"
	// podPolicyName confines the agent's pods to MPS daemons of its node.
	podPolicyName = "tessera-mps-daemons"
	// nodePolicyName confines the agent's node patches to its own node's
	// fabric domain label.
	nodePolicyName = "tessera-node-label"
	// leasePolicyName confines the agent's lease writes to the domains'
	// IMEX channel leases held by its own node.
	leasePolicyName = "tessera-imex-leases"
	// imexPodPolicyName confines the agent's pods to the IMEX daemon pod
	// of its node.
	imexPodPolicyName = "tessera-imex-daemon"
	// A driver no DeviceClass selects: the test's slices never reach a claim.
	testDriver = "chart-test.tessera.dev"
	testLabel  = "e2e.tessera.dev/chart-test"
	nodeA      = "gpu-h100"
	nodeB      = "gpu-mi300x"
)

// applied are the kinds of the rendered chart the test applies; the others
// the API server only validates, in a server-side dry run: the DaemonSet,
// the webhook's Deployment and their Services (the local cluster runs the
// plugins and the webhook as processes, and there is no image), the
// webhook's Secret, and its configuration (the local cluster registers the
// chart's own, pointed at its process; this one names a Service nothing
// serves).
var (
	applied = map[string]bool{
		"ServiceAccount": true, "ClusterRole": true, "ClusterRoleBinding": true, "Role": true, "RoleBinding": true,
		"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
		"DeviceClass": true,
	}
	dryRunOnly = map[string]bool{
		"DaemonSet": true, "Service": true, "PodDisruptionBudget": true,
		"Deployment": true, "Secret": true, "ValidatingWebhookConfiguration": true,
	}
)

// TestChart applies the chart's RBAC, admission policy and DeviceClasses to
// the real API server, then acts as the agent's service account of node A
// (impersonated, with the node name a pod-bound token carries): it may write
// its own node's slices and nothing of node B's, and it has exactly the
// permissions the agent needs. Finally node A's plugin runs under that
// identity, republishes and prepares a claim.
func TestChart(t *testing.T) {
	ctx := context.Background()
	ch, err := helmchart.ForRepo(repo)
	if err != nil {
		t.Fatal(err)
	}
	// With IMEX channels offered, so that the lease Role and its policy
	// are applied too.
	objs, err := ch.Render(chartNS, "imex.channels=64", "imex.daemons=pod")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := clientcmd.BuildConfigFromFlags("", cluster.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	applyChart(t, ctx, objs)

	impersonate := func(id localcluster.Identity) kubernetes.Interface {
		cfg := *admin
		cfg.Impersonate.UserName = id.User
		cfg.Impersonate.Groups = id.Groups
		cfg.Impersonate.Extra = id.Extra
		c, err := kubernetes.NewForConfig(&cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	agent := impersonate(localcluster.ServiceAccountIdentity(chartNS, chartSA, nodeA))
	slices := agent.ResourceV1().ResourceSlices()
	t.Cleanup(func() {
		_ = client.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: testLabel})
	})

	// The policy and the bindings take a moment to be effective: until a
	// write of node B's slice is denied by the policy itself.
	waitPolicy(t, ctx)

	// Writes of Tessera's own pool on node A are server-side dry runs:
	// admission judges them as it would the real ones, and the running
	// agent of node A keeps its pool as it published it.
	dryRun := []string{metav1.DryRunAll}

	// The agent may create exactly the MPS daemon pods its launcher
	// (internal/mps/daemonpod) builds, only on its own node: server-side dry
	// runs against the real API server, as the agent's node-bound
	// identity, of the launcher's pods built from the chart's flags and of
	// every hostile variant of daemonpods.Hostile. The dry run passes the
	// API server's defaulting and validation first, so the policy judges
	// the pod as it would be stored.
	// The agent may patch its own node's fabric domain label and nothing
	// else of any node: server-side dry-run patches as the agent's
	// node-bound identity, of the label and of every way out in
	// nodelabels.Cases, judged by the real API server.
	t.Run("NodeLabelFabricDomainOnly", func(t *testing.T) {
		nodes := agent.CoreV1().Nodes()
		patch := func(node string, c nodelabels.Case) error {
			n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p, err := nodelabels.Patch(n, c)
			if err != nil {
				t.Fatal(err)
			}
			_, err = nodes.Patch(ctx, node, types.StrategicMergePatchType, p, metav1.PatchOptions{DryRun: dryRun})
			return err
		}
		cases := nodelabels.Cases()
		// The policy may take a moment: until node B's label is denied.
		if err := scenario.Poll(ctx, 30*time.Second, func() (bool, string) {
			err := patch(nodeB, cases[0])
			return isPolicyDenial(err), fmt.Sprintf("label of %s: %v", nodeB, err)
		}); err != nil {
			t.Fatal(err)
		}
		deniedByPolicy(t, "the domain label on another node", patch(nodeB, cases[0]), "only its own node")
		for _, c := range cases {
			err := patch(nodeA, c)
			switch {
			case c.Field == "" && err != nil:
				t.Errorf("%s: %v, want admitted", c.Name, err)
			case c.Field != "":
				deniedByPolicy(t, c.Name, err, c.Field)
			}
		}
	})

	// The agent may publish its domain's IMEX channel pool exactly as its
	// publisher builds it, and hold the domain's lease for its own node:
	// server-side dry runs as the agent's node-bound identity of
	// channelcases' writes and ways out, judged by the real API server.
	t.Run("IMEXChannelPoolAndLeasesOnly", func(t *testing.T) { imexWrites(t, ctx, agent) })

	t.Run("MPSDaemonPodsExactlyAsTheAgentMakesThem", func(t *testing.T) {
		_, c := chartDaemonSet(t, objs)
		e := map[string]string{}
		for _, v := range c.Env {
			e[v.Name] = v.Value
		}
		root := e["TESSERA_MPS_ROOT"]
		pods := agent.CoreV1().Pods(chartNS)
		create := func(p *corev1.Pod) error {
			_, err := pods.Create(ctx, p, metav1.CreateOptions{DryRun: dryRun})
			return err
		}
		launcherPod := func(node string, v3 bool) *corev1.Pod {
			p, err := daemonpods.Of(e, chartNS, node, root, v3)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		other := launcherPod(nodeB, false)
		// The policy may take a moment: until the pod of node B is denied.
		if err := scenario.Poll(ctx, 30*time.Second, func() (bool, string) {
			err := create(other)
			return isPolicyDenial(err), fmt.Sprintf("pod of %s: %v", nodeB, err)
		}); err != nil {
			t.Fatal(err)
		}
		deniedByPolicy(t, "a daemon pod of another node", create(other), "only pods of its own node")
		var own *corev1.Pod
		for _, v3 := range []bool{false, true} {
			own = launcherPod(nodeA, v3)
			if err := create(own); err != nil {
				t.Fatalf("agent of %s creating its own node's daemon pod (MPS v3 %v), as its launcher builds it: %v", nodeA, v3, err)
			}
		}
		// A RuntimeClass that exists, so that the API server's RuntimeClass
		// admission lets the variant that names it reach the policy.
		rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "chart-test-" + nodeA}, Handler: "runc"}
		if _, err := client.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = client.NodeV1().RuntimeClasses().Delete(context.Background(), rc.Name, metav1.DeleteOptions{})
		})
		privileged := e["TESSERA_MPS_DAEMON_PRIVILEGED"] == "true"
		for _, tc := range daemonpods.Hostile(own, root, privileged, rc.Name) {
			err := create(tc.Pod)
			switch {
			case tc.Field == "" && err != nil:
				t.Errorf("%s: %v, want admitted", tc.Name, err)
			case tc.Field == "":
			case tc.Invalid:
				if !apierrors.IsInvalid(err) {
					t.Errorf("%s: %v, want refused as invalid by the API server", tc.Name, err)
				}
			default:
				deniedByPolicy(t, tc.Name, err, tc.Field)
			}
		}
		plain := own.DeepCopy()
		plain.Labels = nil
		deniedByPolicy(t, "a pod that is no daemon", create(plain), "only MPS daemon pods")
		if _, err := agent.CoreV1().Pods("default").Create(ctx, own, metav1.CreateOptions{DryRun: dryRun}); !apierrors.IsForbidden(err) {
			t.Errorf("agent creating a pod in another namespace: %v, want forbidden by RBAC", err)
		}
	})

	// The agent may create exactly the IMEX daemon pod it builds
	// (internal/imex/daemonpod), only on its own node, and nothing of
	// imexdaemonpods.Hostile: server-side dry runs as its node-bound
	// identity, judged by the real API server after its own defaulting
	// and validation.
	t.Run("IMEXDaemonPodExactlyAsTheAgentMakesIt", func(t *testing.T) {
		_, c := chartDaemonSet(t, objs)
		e := map[string]string{}
		for _, v := range c.Env {
			e[v.Name] = v.Value
		}
		dir := e["TESSERA_IMEX_DAEMON_DIR"]
		pods := agent.CoreV1().Pods(chartNS)
		create := func(p *corev1.Pod) error {
			_, err := pods.Create(ctx, p, metav1.CreateOptions{DryRun: dryRun})
			return err
		}
		podOf := func(node string) *corev1.Pod {
			p, err := imexdaemonpods.Of(e, chartNS, node, dir)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		if err := scenario.Poll(ctx, 30*time.Second, func() (bool, string) {
			err := create(podOf(nodeB))
			return isPolicyDenial(err), fmt.Sprintf("IMEX daemon pod of %s: %v", nodeB, err)
		}); err != nil {
			t.Fatal(err)
		}
		deniedByPolicy(t, "the IMEX daemon pod of another node", create(podOf(nodeB)), "only pods of its own node")
		own := podOf(nodeA)
		if err := create(own); err != nil {
			t.Fatalf("agent of %s creating its node's IMEX daemon pod, as it builds it: %v", nodeA, err)
		}
		rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "chart-test-imex-" + nodeA}, Handler: "runc"}
		if _, err := client.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = client.NodeV1().RuntimeClasses().Delete(context.Background(), rc.Name, metav1.DeleteOptions{})
		})
		for _, tc := range imexdaemonpods.Hostile(own, dir, e["TESSERA_MPS_DAEMON_PRIVILEGED"] == "true", rc.Name) {
			err := create(tc.Pod)
			switch {
			case tc.Field == "" && err != nil:
				t.Errorf("%s: %v, want admitted", tc.Name, err)
			case tc.Field == "":
			default:
				deniedByPolicy(t, tc.Name, err, tc.Field)
			}
		}
	})

	t.Run("OwnNodeAllowed", func(t *testing.T) {
		if _, err := slices.Create(ctx, ownSlice("chart-a", nodeA, nodeA), metav1.CreateOptions{DryRun: dryRun}); err != nil {
			t.Fatalf("agent of %s creating a slice of its own pool: %v", nodeA, err)
		}
		s := publishedSlice(t, ctx, nodeA)
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels["updated"] = "yes"
		if _, err := slices.Update(ctx, s, metav1.UpdateOptions{DryRun: dryRun}); err != nil {
			t.Fatalf("agent of %s updating its own slice: %v", nodeA, err)
		}
		if err := slices.Delete(ctx, s.Name, metav1.DeleteOptions{DryRun: dryRun}); err != nil {
			t.Fatalf("agent of %s deleting its own slice: %v", nodeA, err)
		}
	})

	// A stolen agent token reaches one driver: on its own node it may not
	// create, change or delete another driver's slices, nor write a pool
	// named after another node.
	t.Run("OtherDriverOnOwnNodeDenied", func(t *testing.T) {
		_, err := slices.Create(ctx, testSlice("chart-a-other-driver", nodeA), metav1.CreateOptions{})
		deniedByPolicy(t, "create of another driver's slice", err, "only its own driver's pool")
		fake := ownSlice("chart-a-fake-nvidia", nodeA, nodeA)
		fake.Spec.Driver = "gpu.nvidia.com"
		_, err = slices.Create(ctx, fake, metav1.CreateOptions{DryRun: dryRun})
		deniedByPolicy(t, "create of gpu.nvidia.com devices", err, "only its own driver's pool")
		other, err := client.ResourceV1().ResourceSlices().Create(ctx, testSlice("chart-a-nic", nodeA), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("admin creating another driver's slice on %s: %v", nodeA, err)
		}
		other.Labels["updated"] = "yes"
		_, err = slices.Update(ctx, other, metav1.UpdateOptions{})
		deniedByPolicy(t, "update of another driver's slice", err, "only its own driver's pool")
		err = slices.Delete(ctx, other.Name, metav1.DeleteOptions{})
		deniedByPolicy(t, "delete of another driver's slice", err, "only its own driver's pool")
		if _, err := client.ResourceV1().ResourceSlices().Get(ctx, other.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("the other driver's slice after the denied delete: %v", err)
		}
		_, err = slices.Create(ctx, ownSlice("chart-a-pool-b", nodeA, nodeB), metav1.CreateOptions{DryRun: dryRun})
		deniedByPolicy(t, "create of a pool named after another node", err, "only its own driver's pool")
	})

	t.Run("OtherNodeDenied", func(t *testing.T) {
		_, err := slices.Create(ctx, testSlice("chart-b-by-a", nodeB), metav1.CreateOptions{})
		deniedByPolicy(t, "create", err, "may write only the ResourceSlices of its own node")
		// A slice of node B (written by the admin, whom the policy does not
		// match) may be neither changed nor deleted by A's agent.
		b, err := client.ResourceV1().ResourceSlices().Create(ctx, testSlice("chart-b", nodeB), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("admin creating a slice of %s: %v", nodeB, err)
		}
		b.Labels["updated"] = "yes"
		_, err = slices.Update(ctx, b, metav1.UpdateOptions{})
		deniedByPolicy(t, "update", err, "may write only the ResourceSlices of its own node")
		err = slices.Delete(ctx, b.Name, metav1.DeleteOptions{})
		deniedByPolicy(t, "delete", err, "may write only the ResourceSlices of its own node")
		// A's own slice may not be moved to node B either (the field is
		// immutable, so the API server may say so before the policy does).
		a := publishedSlice(t, ctx, nodeA)
		a.Spec.NodeName = ptr(nodeB)
		a.Spec.Pool.Name = nodeB
		if _, err := slices.Update(ctx, a, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); err == nil {
			t.Error("agent of node A moved its slice to node B")
		}
		if _, err := client.ResourceV1().ResourceSlices().Get(ctx, b.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("node B's slice after the denied delete: %v", err)
		}
	})

	t.Run("NoNodeInTokenDenied", func(t *testing.T) {
		unbound := impersonate(localcluster.ServiceAccountIdentity(chartNS, chartSA, ""))
		_, err := unbound.ResourceV1().ResourceSlices().Create(ctx, testSlice("chart-unbound", nodeA), metav1.CreateOptions{})
		deniedByPolicy(t, "create without node-name extra", err, "credentials name no node")
	})

	t.Run("Permissions", func(t *testing.T) {
		claim, err := client.ResourceV1().ResourceClaims(chartNS).Create(ctx, &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "rbac-probe"},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.tessera.dev"},
			}}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// What the agent calls.
		allowed := map[string]func() error{
			"get resourceclaim": func() error {
				_, err := agent.ResourceV1().ResourceClaims(chartNS).Get(ctx, claim.Name, metav1.GetOptions{})
				return err
			},
			"list resourceslices": func() error {
				_, err := slices.List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeA})
				return err
			},
			"watch resourceslices": func() error {
				w, err := slices.Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeA})
				if err == nil {
					w.Stop()
				}
				return err
			},
			"get node": func() error {
				_, err := agent.CoreV1().Nodes().Get(ctx, nodeA, metav1.GetOptions{})
				return err
			},
		}
		for what, call := range allowed {
			if err := call(); err != nil {
				t.Errorf("agent cannot %s: %v", what, err)
			}
		}
		// Nothing more.
		forbidden := map[string]func() error{
			"list secrets": func() error {
				_, err := agent.CoreV1().Secrets(chartNS).List(ctx, metav1.ListOptions{})
				return err
			},
			"list resourceclaims": func() error {
				_, err := agent.ResourceV1().ResourceClaims(chartNS).List(ctx, metav1.ListOptions{})
				return err
			},
			"update resourceclaim status": func() error {
				_, err := agent.ResourceV1().ResourceClaims(chartNS).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
				return err
			},
			"patch resourceslice": func() error {
				_, err := slices.Patch(ctx, "chart-a-move", types.MergePatchType, []byte(`{"metadata":{"labels":{"p":"x"}}}`), metav1.PatchOptions{})
				return err
			},
			"deletecollection resourceslices": func() error {
				return slices.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeA})
			},
			// imex.daemons=pod lists the domain's nodes, once per daemon
			// start; it never watches them.
			"watch nodes": func() error {
				w, err := agent.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
				if err == nil {
					w.Stop()
				}
				return err
			},
			"list pods": func() error {
				_, err := agent.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
				return err
			},
			"create events": func() error {
				_, err := agent.CoreV1().Events(chartNS).Create(ctx, eventFor(claim.Name), metav1.CreateOptions{})
				return err
			},
			"create deviceclass": func() error {
				_, err := agent.ResourceV1().DeviceClasses().Create(ctx, &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "chart-test"}}, metav1.CreateOptions{})
				return err
			},
		}
		for what, call := range forbidden {
			if err := call(); !apierrors.IsForbidden(err) {
				t.Errorf("agent may %s (err %v), want Forbidden by RBAC", what, err)
			} else if strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
				t.Errorf("%s: denied by the policy, not RBAC: %v", what, err)
			}
		}
	})

	// With the granular status gate on (1.37's default), claim status too.
	t.Run("ClaimStatusOfOtherNodeDenied", func(t *testing.T) { checkGranularStatus(t, ctx, agent) })

	t.Run("PluginRunsAsAgent", func(t *testing.T) { pluginAsAgent(t, ctx) })
}

// pluginAsAgent restarts node A's plugin with only the chart's permissions
// and the agent's identity: it must republish the node's slices (deleted
// while it was down) and prepare a claim. It is put back on the admin
// kubeconfig afterwards.
func pluginAsAgent(t *testing.T, ctx context.Context) {
	kc := filepath.Join(cluster.Dir, "agent-"+nodeA+".kubeconfig")
	if err := cluster.WriteKubeconfigAs(kc, localcluster.ServiceAccountIdentity(chartNS, chartSA, nodeA)); err != nil {
		t.Fatal(err)
	}
	before := publishedDevices(t, nodeA)
	s, err := cluster.LoadState()
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.StopPlugin(s, nodeA); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s, err := cluster.LoadState()
		if err != nil {
			t.Fatal(err)
		}
		if err := cluster.StopPlugin(s, nodeA); err != nil {
			t.Error(err)
		}
		if err := cluster.StartPlugin(s, nodeByName(t, nodeA)); err != nil {
			t.Fatal(err)
		}
		if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) { return localcluster.PoolPublished(ctx, client, nodeA) }); err != nil {
			t.Errorf("node %s's plugin back on the admin kubeconfig: %v", nodeA, err)
		}
	})
	if err := client.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeA}); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(cluster.LogDir(), "plugin-"+nodeA+".log")
	var offset int64
	if fi, err := os.Stat(logPath); err == nil {
		offset = fi.Size()
	}
	if err := cluster.StartPluginWithKubeconfig(s, nodeByName(t, nodeA), kc); err != nil {
		t.Fatal(err)
	}
	if s, err := cluster.LoadState(); err != nil || !slices.ContainsFunc(s.Procs, func(p localcluster.Proc) bool {
		return p.Name == "plugin-"+nodeA && slices.Contains(p.Args, "--kubeconfig="+kc)
	}) {
		t.Fatalf("node %s's plugin is not running with %s (%v)", nodeA, kc, err)
	}
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		if ok, msg := localcluster.PoolPublished(ctx, client, nodeA); !ok {
			return false, msg
		}
		n := publishedDevices(t, nodeA)
		return n == before, fmt.Sprintf("%d devices published, %d before", n, before)
	}); err != nil {
		t.Fatalf("plugin as the agent did not republish: %v\n%s", err, logSince(logPath, offset))
	}
	ns := namespace(t)
	uid := gpuPod(t, ns, "as-agent", nodeA)
	if err := scenario.WaitRunning(ctx, client, ns, []string{"as-agent"}, 90*time.Second); err != nil {
		t.Fatalf("plugin as the agent did not prepare: %v\n%s", err, logSince(logPath, offset))
	}
	if !specExists(nodeA, uid) {
		t.Error("no CDI spec for the claim")
	}
	deleteAll(t, ns)
	if log := logSince(logPath, offset); strings.Contains(strings.ToLower(log), "forbidden") {
		t.Errorf("the plugin was refused something:\n%s", log)
	}
	_ = client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
}

func logSince(path string, offset int64) string {
	data, err := os.ReadFile(path)
	if err != nil || int64(len(data)) < offset {
		return fmt.Sprint(err)
	}
	return string(data[offset:])
}

func publishedDevices(t *testing.T, node string) int {
	t.Helper()
	n := 0
	for _, s := range nodeSlices(t, node) {
		if s.Spec.Driver == "gpu.tessera.dev" {
			n += len(s.Spec.Devices)
		}
	}
	return n
}

// applyChart server-side applies the rendered objects of the applied kinds
// (the DeviceClasses replace the local cluster's, which have the same specs)
// and removes all but the DeviceClasses when the test ends.
func applyChart(t *testing.T, ctx context.Context, objs []*unstructured.Unstructured) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", cluster.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: chartNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	var created []func()
	t.Cleanup(func() {
		for i := len(created) - 1; i >= 0; i-- {
			created[i]()
		}
		_ = client.CoreV1().Namespaces().Delete(ctx, chartNS, metav1.DeleteOptions{})
	})
	n := 0
	for _, o := range objs {
		if !applied[o.GetKind()] && !dryRunOnly[o.GetKind()] {
			t.Fatalf("the chart renders a %s the test neither applies nor validates", o.GetKind())
		}
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %v", gvk, err)
		}
		var r dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == "namespace" {
			r = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		if dryRunOnly[o.GetKind()] {
			// Validated by the API server (the whole admission chain), not
			// created: there is no image to run.
			if o.GetKind() == "ValidatingWebhookConfiguration" {
				// The local cluster registered the chart's configuration
				// under this name, pointed at its process: an apply would
				// merge the two clientConfigs (url and service).
				o = o.DeepCopy()
				o.SetName(o.GetName() + "-dry-run")
			}
			if _, err := r.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: "tessera-chart-e2e", Force: true, DryRun: []string{metav1.DryRunAll}}); err != nil {
				t.Fatalf("server-side dry run of %s %s: %v", o.GetKind(), o.GetName(), err)
			}
			continue
		}
		if _, err := r.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: "tessera-chart-e2e", Force: true}); err != nil {
			t.Fatalf("apply %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		n++
		if o.GetKind() != "DeviceClass" {
			name := o.GetName()
			created = append(created, func() { _ = r.Delete(context.Background(), name, metav1.DeleteOptions{}) })
		}
	}
	// Two service accounts (the agent's, the daemons'), the cluster role
	// and its binding, the daemons' role and its binding, the IMEX leases'
	// role and its binding, five policies with their bindings (slices, node
	// label, MPS daemon pods, IMEX leases, the IMEX daemon pod), seven
	// classes (vfio's among them), and the metrics scrapers' cluster role.
	if n != 26 {
		t.Fatalf("applied %d objects of the chart, want 26", n)
	}
}

// waitPolicy waits until the agent's write of node B's slice is denied by the
// policy (RBAC and the policy each take a moment to be effective); a write
// that got through before is undone.
func waitPolicy(t *testing.T, ctx context.Context) {
	t.Helper()
	agent := func() kubernetes.Interface {
		cfg, err := clientcmd.BuildConfigFromFlags("", cluster.Kubeconfig())
		if err != nil {
			t.Fatal(err)
		}
		id := localcluster.ServiceAccountIdentity(chartNS, chartSA, nodeA)
		cfg.Impersonate.UserName, cfg.Impersonate.Groups, cfg.Impersonate.Extra = id.User, id.Groups, id.Extra
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}()
	start := time.Now()
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		_, err := agent.ResourceV1().ResourceSlices().Create(ctx, testSlice("chart-probe", nodeB), metav1.CreateOptions{})
		if err == nil {
			_ = client.ResourceV1().ResourceSlices().Delete(ctx, "chart-probe", metav1.DeleteOptions{})
			return false, "a slice of node B was created: the policy is not effective yet"
		}
		return isPolicyDenial(err), err.Error()
	}); err != nil {
		t.Fatalf("the policy never became effective: %v", err)
	}
	t.Logf("policy effective after %s", time.Since(start).Round(100*time.Millisecond))
	p, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, policyName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tc := p.Status.TypeChecking; tc != nil && len(tc.ExpressionWarnings) > 0 {
		t.Errorf("type checking of the policy: %+v", tc.ExpressionWarnings)
	}
}

func isPolicyDenial(err error) bool {
	return (apierrors.IsForbidden(err) || apierrors.IsInvalid(err)) &&
		(strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policyName+"'") ||
			strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+podPolicyName+"'") ||
			strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+nodePolicyName+"'") ||
			strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+leasePolicyName+"'") ||
			strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+imexPodPolicyName+"'"))
}

// deniedByPolicy fails unless err is the policy's denial with message.
func deniedByPolicy(t *testing.T, what string, err error, message string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: allowed, want denied by the policy", what)
	case !isPolicyDenial(err) || !strings.Contains(err.Error(), "tessera: ") || !strings.Contains(err.Error(), message):
		t.Errorf("%s: %v; want the policy's denial %q", what, err, message)
	}
}

// ownSlice is a slice of Tessera's driver on node in the pool named pool.
func ownSlice(name, node, pool string) *resourceapi.ResourceSlice {
	s := testSlice(name, node)
	s.Spec.Driver = names.DriverName
	s.Spec.Pool.Name = pool
	return s
}

// publishedSlice is one of the slices node's agent published.
func publishedSlice(t *testing.T, ctx context.Context, node string) *resourceapi.ResourceSlice {
	t.Helper()
	l, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node + ",spec.driver=" + names.DriverName})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) == 0 {
		t.Fatalf("no ResourceSlice of %s published for %s", names.DriverName, node)
	}
	return &l.Items[0]
}

// testSlice is a slice of another driver (testDriver) on node.
func testSlice(name, node string) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{testLabel: "true"}},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   testDriver,
			NodeName: ptr(node),
			Pool:     resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			Devices:  []resourceapi.Device{{Name: "dev0"}},
		},
	}
}

func eventFor(claim string) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "chart-test-"},
		InvolvedObject: corev1.ObjectReference{Kind: "ResourceClaim", Namespace: chartNS, Name: claim},
		Reason:         "Test", Message: "test",
	}
}

func ptr[T any](v T) *T { return &v }

// chartDaemonSet is the agent's container of the rendered chart.
func chartDaemonSet(t *testing.T, objs []*unstructured.Unstructured) (*appsv1.DaemonSet, *corev1.Container) {
	t.Helper()
	for _, o := range helmchart.Find(objs, "DaemonSet", "") {
		var ds appsv1.DaemonSet
		if err := helmchart.Convert(o, &ds); err != nil {
			t.Fatal(err)
		}
		return &ds, &ds.Spec.Template.Spec.Containers[0]
	}
	t.Fatal("the chart renders no DaemonSet")
	return nil, nil
}
