package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// Gangs (docs/training.md): the Workload API's PodGroups with gang
// scheduling and pod-group claims, on in the e2e cluster
// (localcluster.Config.Workloads). The demo files 16-18 run through
// TestScenarios with these checks.

func init() {
	checks["16-gang-one-island.yaml"] = checkGangOneIsland
	checks["18-gang-mig-slices.yaml"] = checkGangMIGSlices
	afterChecks["18-gang-mig-slices.yaml"] = afterChecks["09-dynamic-mig.yaml"]
	outcomeChecks["17-gang-waits-whole.yaml"] = checkGangWaitsWhole
}

// groupClaim checks that every pod of pods got its device from one claim,
// the PodGroup's: owned by and reserved for group alone, and that each
// worker's container got exactly one device of it, a different one each.
// It returns the devices in pod order and the node.
func groupClaim(t *testing.T, ns, group string, pods map[string]got) ([]resourceapi.Device, string) {
	t.Helper()
	names := make([]string, 0, len(pods))
	for n := range pods {
		names = append(names, n)
	}
	sort.Strings(names)
	var devs []resourceapi.Device
	claimName, node := "", ""
	seen := map[string]string{}
	for _, n := range names {
		g := pods[n]
		if len(g.placement.Claims) != 1 {
			t.Fatalf("pod %s has claims %v, want the group's one", n, g.placement.Claims)
		}
		if claimName == "" {
			claimName, node = g.placement.Claims[0].Name, g.placement.Node
		}
		if c := g.placement.Claims[0].Name; c != claimName {
			t.Errorf("pod %s uses claim %s, another pod %s: want one claim for the group", n, c, claimName)
		}
		if g.placement.Node != node {
			t.Errorf("pod %s on %s, another on %s: the group's claim ties them to one node", n, g.placement.Node, node)
		}
		mine := g.byContainer["worker"]
		if len(mine) != 1 {
			t.Fatalf("pod %s's container uses %d devices, want its request's one", n, len(mine))
		}
		if prev, ok := seen[mine[0].Name]; ok {
			t.Errorf("device %s given to %s and %s", mine[0].Name, prev, n)
		}
		seen[mine[0].Name] = n
		devs = append(devs, mine[0])
	}
	rc, err := client.ResourceV1().ResourceClaims(ns).Get(context.Background(), claimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o := metav1.GetControllerOf(rc); o == nil || o.Kind != "PodGroup" || o.Name != group {
		t.Errorf("claim %s controlled by %+v, want PodGroup %s", claimName, o, group)
	}
	if r := rc.Status.ReservedFor; len(r) != 1 || r[0].Resource != "podgroups" || r[0].Name != group {
		t.Errorf("claim %s reserved for %+v, want the PodGroup %s alone", claimName, r, group)
	}
	return devs, node
}

// checkGangOneIsland: 8 workers, one H100 each, all on one fabric island,
// through one pod-group claim prepared once on the node.
func checkGangOneIsland(t *testing.T, pods map[string]got) {
	if len(pods) != 8 {
		t.Fatalf("%d pods ran, want 8", len(pods))
	}
	devs, node := groupClaim(t, podNamespace(t, pods), "train-8", pods)
	island := str(devs[0], "fabricIsland")
	for _, d := range devs {
		if str(d, "model") != "H100" || str(d, "fabricIsland") != island {
			t.Errorf("device %s: %s on island %s, want H100s on one island %s", d.Name, str(d, "model"), str(d, "fabricIsland"), island)
		}
	}
	if island == "" || strings.HasPrefix(island, "pcie") {
		t.Errorf("island %q: want an NVSwitch island", island)
	}
	// One prepared claim on the node for the eight pods.
	if n := len(checkpointClaims(t, node)); n != 1 {
		t.Errorf("%d claims prepared on %s, want the group's one", n, node)
	}
}

// podNamespace is the namespace of the scenario's pods.
func podNamespace(t *testing.T, pods map[string]got) string {
	t.Helper()
	for name := range pods {
		l, err := client.CoreV1().Pods(metav1.NamespaceAll).List(context.Background(), metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil || len(l.Items) != 1 {
			t.Fatalf("pod %s: %v (%d found)", name, err, len(l.Items))
		}
		return l.Items[0].Namespace
	}
	t.Fatal("no pods")
	return ""
}

// checkGangMIGSlices: 4 workers on the dynamic node, a 1g.10gb slice each,
// all four carved on one GPU for the group's claim.
func checkGangMIGSlices(t *testing.T, pods map[string]got) {
	if len(pods) != 4 {
		t.Fatalf("%d pods ran, want 4", len(pods))
	}
	devs, node := groupClaim(t, podNamespace(t, pods), "finetune", pods)
	if node != dynamicNode {
		t.Errorf("the group's claim is on %s, want %s", node, dynamicNode)
	}
	parent := str(devs[0], "parentUUID")
	for _, d := range devs {
		if str(d, "profile") != "1g.10gb" || str(d, "parentUUID") != parent {
			t.Errorf("device %s: %s of %s, want 1g.10gb slices of one GPU %s", d.Name, str(d, "profile"), str(d, "parentUUID"), parent)
		}
	}
	var carved int
	for _, p := range simState(t, dynamicNode).partitions {
		if p.gpu == parent && p.profile == "1g.10gb" {
			carved++
		}
	}
	if carved != 4 {
		t.Errorf("%d 1g.10gb instances carved on %s, want 4", carved, parent)
	}
}

// checkGangWaitsWhole: while job A (8 H100s) runs, job B (15 workers, an
// H100 each: more than A leaves free) stays Pending as a gang holding
// nothing; explain names the first worker no node takes; when A ends, B
// runs, all 15.
func checkGangWaitsWhole(t *testing.T, o outcome) {
	ctx := context.Background()
	if len(o.pods) != 8 {
		t.Fatalf("%d pods ran, want job A's 8", len(o.pods))
	}
	groupClaim(t, o.ns, "train-a", o.pods)
	bPods := func() []string {
		var out []string
		for i := range 15 {
			out = append(out, fmt.Sprintf("train-b-worker-%d", i))
		}
		return out
	}()

	// Holding nothing: no claim of B is allocated, however long it waits.
	claims, err := client.ResourceV1().ResourceClaims(o.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var bClaims int
	for _, c := range claims.Items {
		if strings.HasPrefix(c.Name, "train-b-worker-") {
			bClaims++
			if c.Status.Allocation != nil || len(c.Status.ReservedFor) > 0 {
				t.Errorf("claim %s of the waiting gang is allocated or reserved: %+v", c.Name, c.Status)
			}
		}
	}
	if bClaims != 15 {
		t.Errorf("%d claims for job B's workers, want 15", bClaims)
	}
	pg, err := client.SchedulingV1beta1().PodGroups(o.ns).Get(ctx, "train-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := meta(pg.Status.Conditions, schedulingapi.PodGroupInitiallyScheduled); c == nil || c.Status != metav1.ConditionFalse || c.Reason != schedulingapi.PodGroupReasonUnschedulable {
		t.Errorf("PodGroup train-b condition %+v, want %s False %s", c, schedulingapi.PodGroupInitiallyScheduled, schedulingapi.PodGroupReasonUnschedulable)
	}
	for _, n := range bPods {
		p, err := client.CoreV1().Pods(o.ns).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s of the waiting gang is bound to %s", n, p.Spec.NodeName)
		}
	}

	// explain agrees: the gang does not fit, and says which worker first
	// finds no node, with A's devices held.
	out, ok := kubectlTesseraStatus(t, "explain", "podgroup/train-b", "-n", o.ns)
	if !ok || !strings.Contains(out, "PodGroup "+o.ns+"/train-b (a gang of minCount 15, 15 pods) does not fit") ||
		!strings.Contains(out, "fits on no node once the") || !strings.Contains(out, "in use (by "+o.ns+"/train-a-gpu") {
		t.Errorf("explain podgroup/train-b:\n%s", out)
	}
	if pod, _ := kubectlTesseraStatus(t, "explain", "pod/train-b-worker-3", "-n", o.ns); !strings.HasPrefix(pod, "PodGroup "+o.ns+"/train-b") {
		t.Errorf("explain of a waiting gang's pod does not explain its gang:\n%s", pod)
	}

	// A ends: B starts, whole.
	zero := int64(0)
	for name := range o.pods {
		if err := client.CoreV1().Pods(o.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	if err := client.SchedulingV1beta1().PodGroups(o.ns).Delete(ctx, "train-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := scenario.WaitRunning(ctx, client, o.ns, bPods, 180*time.Second); err != nil {
		t.Fatalf("job B after job A ended: %v", err)
	}
	used := map[string]string{}
	for _, n := range bPods {
		pl, err := scenario.Describe(ctx, client, o.ns, n, cluster.RecordDir)
		if err != nil {
			t.Fatal(err)
		}
		if len(pl.Claims) != 1 || len(pl.Claims[0].Devices) != 1 {
			t.Fatalf("pod %s claims %+v, want one H100", n, pl.Claims)
		}
		d := pl.Claims[0].Devices[0]
		k := d.Pool + "/" + d.Device
		if prev, ok := used[k]; ok {
			t.Errorf("%s given to %s and %s", k, prev, n)
		}
		used[k] = n
		if m := str(device(t, d.Pool, d.Device), "model"); m != "H100" {
			t.Errorf("pod %s got %s, a %s", n, k, m)
		}
	}
}

func meta(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

// TestPodGroupClaimLifecycle: a pod-group claim lives with its group, not
// its pods. Prepared once on the node while any worker runs there;
// unprepared when the node's last worker is gone, though the claim stays
// allocated and reserved for the group; prepared again, with the same
// device per request, for workers that replace them; and deleted, its
// devices free, with the group.
func TestPodGroupClaimLifecycle(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	const node = "gpu-h100"
	h100 := []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["gpu.tessera.dev"].model == "H100"`}}}
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "pair"}}
	for i := range 2 {
		tmpl.Spec.Spec.Devices.Requests = append(tmpl.Spec.Spec.Devices.Requests, resourceapi.DeviceRequest{
			Name: fmt.Sprintf("worker-%d", i), Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.tessera.dev", Selectors: h100}})
	}
	if _, err := client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pg := &schedulingapi.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "pair"}, Spec: schedulingapi.PodGroupSpec{
		SchedulingPolicy: schedulingapi.PodGroupSchedulingPolicy{Gang: &schedulingapi.GangSchedulingPolicy{MinCount: 2}},
		ResourceClaims:   []schedulingapi.PodGroupResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptrTo("pair")}},
	}}
	if _, err := client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	worker := func(name, request string) {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
			NodeSelector:    map[string]string{"kubernetes.io/hostname": node},
			SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptrTo("pair")},
			ResourceClaims:  []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptrTo("pair")}},
			Containers: []corev1.Container{{Name: "worker", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu", Request: request}}}}},
		}}
		if _, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	worker("w0", "worker-0")
	worker("w1", "worker-1")
	if err := scenario.WaitRunning(ctx, client, ns, []string{"w0", "w1"}, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	g, err := client.SchedulingV1beta1().PodGroups(ns).Get(ctx, "pair", metav1.GetOptions{})
	if err != nil || len(g.Status.ResourceClaimStatuses) != 1 || g.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
		t.Fatalf("PodGroup status %+v: %v", g.Status, err)
	}
	claimName := *g.Status.ResourceClaimStatuses[0].ResourceClaimName
	rc, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, claimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uid := string(rc.UID)
	deviceOf := func(pod string) string {
		t.Helper()
		pl, err := scenario.Describe(ctx, client, ns, pod, cluster.RecordDir)
		if err != nil {
			t.Fatal(err)
		}
		// The device the container got: its one GPU node.
		var gpus []string
		for _, d := range pl.Containers[0].Devices {
			if nvidiaGPU.MatchString(d.Path) {
				gpus = append(gpus, d.Path)
			}
		}
		if len(gpus) != 1 {
			t.Fatalf("pod %s's container has GPU nodes %v, want its request's one", pod, gpus)
		}
		return gpus[0]
	}
	first := deviceOf("w0")
	prepared := func() bool { _, ok := checkpointClaims(t, node)[uid]; return ok && specExists(node, uid) }
	if !prepared() {
		t.Fatal("the group's claim is not prepared on the node")
	}
	// A graceful delete: the kubelet removes the pod object only once it
	// has terminated the pod, and it decides on the pod's claims (calls
	// the driver's unprepare, or not, when another pod on the node still
	// uses one) before it writes the pod's final status (SyncTerminatingPod:
	// "resources must be unprepared ... BEFORE the pod status is changed on
	// the API server"). So the object's absence is the event after which
	// an unprepare would have come.
	grace := int64(1)
	del := func(pod string) {
		t.Helper()
		if err := client.CoreV1().Pods(ns).Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
			t.Fatal(err)
		}
		if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
			_, err := client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
			return err != nil, "pod still there"
		}); err != nil {
			t.Fatal(err)
		}
	}

	// One worker goes: the other still uses the claim.
	del("w1")
	if !prepared() {
		t.Error("the claim was unprepared while worker w0 still runs")
	}
	// The last worker on the node goes: unprepared, the claim kept.
	del("w0")
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) { return !prepared(), "still prepared" }); err != nil {
		t.Fatalf("the claim with no worker left on the node: %v", err)
	}
	rc, err = client.ResourceV1().ResourceClaims(ns).Get(ctx, claimName, metav1.GetOptions{})
	if err != nil || rc.Status.Allocation == nil || len(rc.Status.ReservedFor) != 1 || rc.Status.ReservedFor[0].Resource != "podgroups" {
		t.Fatalf("the group's claim after its pods went: %v, status %+v; want it allocated and reserved for the group", err, rc.Status)
	}
	// Replacement workers: the gang's minCount counts pods that exist, so
	// both come back (one alone would wait for the other, "waiting for
	// minCount pods"); the claim is prepared again, the same GPU per
	// request.
	worker("w0-again", "worker-0")
	worker("w1-again", "worker-1")
	if err := scenario.WaitRunning(ctx, client, ns, []string{"w0-again", "w1-again"}, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := deviceOf("w0-again"); got != first {
		t.Errorf("replacement worker got %s, the first %s", got, first)
	}
	if !prepared() {
		t.Error("the claim is not prepared for the replacement worker")
	}
	// The group goes: its claim with it, unprepared.
	del("w0-again")
	del("w1-again")
	if err := client.SchedulingV1beta1().PodGroups(ns).Delete(ctx, "pair", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := scenario.Poll(ctx, 90*time.Second, func() (bool, string) {
		_, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, claimName, metav1.GetOptions{})
		return err != nil && !prepared(), fmt.Sprintf("claim: %v, prepared: %v", err, prepared())
	}); err != nil {
		t.Fatalf("after the group was deleted: %v", err)
	}
}

func ptrTo[T any](v T) *T { return &v }
