package containerd

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// TestReadinessFollowsSlices: the chart's readiness probe (/readyz) keeps a
// node's agent pod out of Ready while the API server refuses its slices,
// and lets it in once they are published. A policy refuses the node's
// slices, the agent pod is replaced and the slices deleted; the new agent
// runs, registers with the kubelet, and stays not Ready through several
// probes; the policy goes, the agent publishes and turns Ready.
func TestReadinessFollowsSlices(t *testing.T) {
	ctx := context.Background()
	node := nodes[0].Name
	refuse(t, node)

	old := agentPod(t, node)
	if err := client.CoreV1().Pods(localcluster.AgentNamespace).Delete(ctx, old.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	var started *corev1.Pod
	if err := scenario.Poll(ctx, 60*time.Second, func() (bool, string) {
		l, err := client.CoreV1().Pods(localcluster.AgentNamespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false, err.Error()
		}
		for i, p := range l.Items {
			if isAgent(&p) && p.UID != old.UID && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil {
				started = &l.Items[i]
				return true, ""
			}
		}
		return false, "no new agent container running"
	}); err != nil {
		t.Fatal(err)
	}
	if err := client.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node}); err != nil {
		t.Fatal(err)
	}
	// Readiness is probed every 10 s after 2 s: 25 s sees at least two.
	for deadline := time.Now().Add(25 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		p, err := client.CoreV1().Pods(localcluster.AgentNamespace).Get(ctx, started.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if podReady(p) {
			ok, msg := localcluster.PoolPublished(ctx, client, node)
			t.Fatalf("agent pod %s Ready while the API server refuses its slices (pool published: %v %s)", p.Name, ok, msg)
		}
	}
	unrefuse(t)
	waitAgent(t, node, func(p *corev1.Pod) bool { return p.UID == started.UID }, "Ready with its pool published")
}

const refusePolicy = "e2e-refuse-node-slices"

// refuse makes the API server refuse ResourceSlices of node, and waits
// until it does (a server-side dry run is refused).
func refuse(t *testing.T, node string) {
	t.Helper()
	ctx := context.Background()
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: refusePolicy},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{"resource.k8s.io"}, APIVersions: []string{"*"}, Resources: []string{"resourceslices"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: "!has(object.spec.nodeName) || object.spec.nodeName != '" + node + "'",
				Message:    "e2e: this node's slices are refused",
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: refusePolicy},
		Spec:       admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: refusePolicy, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}
	if _, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unrefuse(t) })
	if _, err := client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	probe := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-probe-"},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   "gpu.tessera.dev",
			Pool:     resourceapi.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			NodeName: ptr.To(node),
		},
	}
	if err := scenario.Poll(ctx, 30*time.Second, func() (bool, string) {
		_, err := client.ResourceV1().ResourceSlices().Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && !strings.Contains(err.Error(), "this node's slices are refused") {
			return false, "dry run refused for another reason: " + err.Error()
		}
		return err != nil, "the policy does not refuse yet"
	}); err != nil {
		t.Fatal(err)
	}
}

func unrefuse(t *testing.T) {
	ctx := context.Background()
	_ = client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, refusePolicy, metav1.DeleteOptions{})
	_ = client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, refusePolicy, metav1.DeleteOptions{})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
