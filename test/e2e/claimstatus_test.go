package e2e

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/helmchart"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// granularGate is the feature that narrows resourceclaims/status to the
// caller's node and driver (beta, on by default from 1.36).
const granularGate = "DRAResourceClaimGranularStatusAuthorization"

// statusAttempts are what a stolen agent token of node A tries on claim
// status, and what came of each.
type statusAttempts struct {
	otherNodeDevices   error // this driver's device status on a claim of node B
	ownNodeReservedFor error // reservedFor of a claim of its own node
	ownNodeDevices     error // this driver's device status on a claim of its own node
}

// tryClaimStatus creates, as admin, a claim allocated on node B and one
// on node A in namespace ns, then patches their status as the agent of A.
func tryClaimStatus(t *testing.T, ctx context.Context, admin, agent kubernetes.Interface, ns string) statusAttempts {
	t.Helper()
	b := allocatedClaim(t, ctx, admin, ns, "status-node-b", nodeB)
	a := allocatedClaim(t, ctx, admin, ns, "status-node-a", nodeA)
	// The claims name real devices and get a forged Prepared=False: gone
	// before the test ends, so no later test (kubectl tessera's holders,
	// doctor) sees them.
	t.Cleanup(func() {
		for _, c := range []*resourceapi.ResourceClaim{a, b} {
			_ = admin.ResourceV1().ResourceClaims(ns).Delete(context.Background(), c.Name, metav1.DeleteOptions{})
		}
		if err := scenario.Poll(context.Background(), 30*time.Second, func() (bool, string) {
			l, err := admin.ResourceV1().ResourceClaims(ns).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			return len(l.Items) == 0, fmt.Sprintf("%d claims left in %s", len(l.Items), ns)
		}); err != nil {
			t.Error(err)
		}
	})
	patch := func(c *resourceapi.ResourceClaim, body string) error {
		_, err := agent.ResourceV1().ResourceClaims(ns).Patch(ctx, c.Name, types.MergePatchType, []byte(body), metav1.PatchOptions{}, "status")
		return err
	}
	devices := func(pool string) string {
		return fmt.Sprintf(`{"status":{"devices":[{"driver":%q,"pool":%q,"device":"gpu-0","conditions":[{"type":%q,"status":"False","reason":"Forged","message":"written by the agent of %s","lastTransitionTime":%q}]}]}}`,
			names.DriverName, pool, names.ConditionPrepared, nodeA, time.Now().UTC().Format(time.RFC3339))
	}
	return statusAttempts{
		otherNodeDevices:   patch(b, devices(nodeB)),
		ownNodeReservedFor: patch(a, fmt.Sprintf(`{"status":{"reservedFor":[{"resource":"pods","name":"thief","uid":%q}]}}`, uuid.NewUUID())),
		ownNodeDevices:     patch(a, devices(nodeA)),
	}
}

// allocatedClaim is a claim whose status says the scheduler allocated
// device gpu-0 of node's pool on node, as the scheduler writes it.
func allocatedClaim(t *testing.T, ctx context.Context, admin kubernetes.Interface, ns, name, node string) *resourceapi.ResourceClaim {
	t.Helper()
	c, err := admin.ResourceV1().ResourceClaims(ns).Create(ctx, &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.tessera.dev"},
		}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Status.Allocation = &resourceapi.AllocationResult{
		Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: names.DriverName, Pool: node, Device: "gpu-0",
		}}},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}},
	}
	c, err = admin.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, c, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("admin allocating claim %s on %s: %v", name, node, err)
	}
	return c
}

// forbiddenFor: err is the API server's refusal naming the permission it
// asked for (resourceclaims/driver or resourceclaims/binding).
func forbiddenFor(t *testing.T, what string, err error, permission string) {
	t.Helper()
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Errorf("%s: %v, want refused", what, err)
		return
	}
	if !strings.Contains(err.Error(), permission) {
		t.Errorf("%s: refused for another reason (want %s): %v", what, permission, err)
	}
}

// checkGranularStatus: with the gate on (the local cluster's default), the
// chart's rules let the agent of node A write this driver's device status
// of its own node's claims and nothing else of any claim's status.
func checkGranularStatus(t *testing.T, ctx context.Context, agent kubernetes.Interface) {
	ns := namespace(t)
	got := tryClaimStatus(t, ctx, client, agent, ns)
	forbiddenFor(t, "device status of another node's claim", got.otherNodeDevices, "resourceclaims/driver")
	forbiddenFor(t, "reservedFor of its own node's claim", got.ownNodeReservedFor, "resourceclaims/binding")
	if got.ownNodeDevices != nil {
		t.Errorf("device status of its own node's claim: %v", got.ownNodeDevices)
	}
}

// TestClaimStatusWithoutGranularAuthorization shows the hole that
// rbac.claimStatus closes before 1.36: on an API server with the gate off,
// the same rules let the agent of node A rewrite the status of a claim
// allocated on node B, and reserve its own node's claim for any pod.
// A cluster of its own (an API server and controllers, no nodes).
func TestClaimStatusWithoutGranularAuthorization(t *testing.T) {
	ctx := context.Background()
	off := localcluster.ForRepo(repo)
	off.Dir = filepath.Join(repo, "_output/e2e-gate-off-cluster")
	off.Nodes = nil
	off.APIServerArgs = []string{"--feature-gates=" + granularGate + "=false"}
	if err := off.Up(ctx, io.Discard); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := off.Down(io.Discard); err != nil {
			t.Error(err)
		}
	})
	admin, err := clientcmd.BuildConfigFromFlags("", off.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	adminClient := kubernetes.NewForConfigOrDie(admin)

	// The chart's role and binding, as `always` grants them (on 1.37 auto
	// renders the same: Helm cannot see the gate).
	ch, err := helmchart.ForRepo(repo)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := ch.Render(chartNS, "rbac.claimStatus=always")
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	var binding rbacv1.ClusterRoleBinding
	if err := helmchart.Convert(helmchart.Find(objs, "ClusterRole", "tessera")[0], &role); err != nil {
		t.Fatal(err)
	}
	if err := helmchart.Convert(helmchart.Find(objs, "ClusterRoleBinding", "tessera")[0], &binding); err != nil {
		t.Fatal(err)
	}
	if _, err := adminClient.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := adminClient.RbacV1().ClusterRoleBindings().Create(ctx, &binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	agentCfg := rest.CopyConfig(admin)
	id := localcluster.ServiceAccountIdentity(chartNS, chartSA, nodeA)
	agentCfg.Impersonate = rest.ImpersonationConfig{UserName: id.User, Groups: id.Groups, Extra: id.Extra}
	agent := kubernetes.NewForConfigOrDie(agentCfg)

	ns := "gate-off"
	if _, err := adminClient.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := localcluster.WaitPodsAdmitted(ctx, adminClient, ns); err != nil {
		t.Fatal(err)
	}
	// RBAC takes a moment to reach the authorizer's cache: until the
	// role's first rule (get resourceclaims) holds, the others do not.
	if err := scenario.Poll(ctx, 30*time.Second, func() (bool, string) {
		_, err := agent.ResourceV1().ResourceClaims(ns).Get(ctx, "none", metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("agent's get of a claim: %v", err)
	}); err != nil {
		t.Fatal(err)
	}
	got := tryClaimStatus(t, ctx, adminClient, agent, ns)
	if got.ownNodeDevices != nil {
		t.Errorf("gate off: device status of its own node's claim: %v", got.ownNodeDevices)
	}
	if got.otherNodeDevices != nil {
		t.Errorf("gate off: the agent of %s could not write %s's claim status (%v); the hole this test shows is gone, revisit rbac.claimStatus", nodeA, nodeB, got.otherNodeDevices)
	}
	if got.ownNodeReservedFor != nil {
		t.Errorf("gate off: the agent could not change reservedFor (%v); the hole this test shows is gone", got.ownNodeReservedFor)
	}
}
