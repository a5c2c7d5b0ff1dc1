package chart

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/nodelabels"
)

// TestNodeLabelPolicy: the agent's token may set or remove its node's
// fabric domain label and change nothing else of any node (the chart's
// nodes patch right, narrowed by the policy), evaluated with Kubernetes'
// CEL; TestChart in test/e2e sends the same to the real API server.
func TestNodeLabelPolicy(t *testing.T) {
	const agent = "system:serviceaccount:" + ns + ":tessera"
	const node = "tray-1"
	objs := render(t)
	p := compilePolicy(t, one[admissionv1.ValidatingAdmissionPolicy](t, objs, "ValidatingAdmissionPolicy", "tessera-node-label"))
	vapb := one[admissionv1.ValidatingAdmissionPolicyBinding](t, objs, "ValidatingAdmissionPolicyBinding", "tessera-node-label")
	if vapb.Spec.PolicyName != "tessera-node-label" || len(vapb.Spec.ValidationActions) != 1 || vapb.Spec.ValidationActions[0] != admissionv1.Deny {
		t.Errorf("binding %+v", vapb.Spec)
	}
	base := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{"kubernetes.io/hostname": node}, Annotations: map[string]string{"a": "b"}},
		Spec:       corev1.NodeSpec{PodCIDR: "10.0.0.0/24", Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}},
	}
	labelled := base.DeepCopy()
	labelled.Labels[names.NodeLabelFabricDomain] = nodelabels.Domain
	check := func(name, op, user, tokenNode string, obj, old *corev1.Node, field string) {
		t.Helper()
		msg := p.admitObject(t, user, tokenNode, op, nodeOrNil(obj), nodeOrNil(old))
		switch {
		case field == "" && msg != "":
			t.Errorf("%s: denied (%s), want admitted", name, msg)
		case field != "" && !strings.Contains(msg, field):
			t.Errorf("%s: %q, want a refusal naming %s", name, msg, field)
		}
	}
	for _, c := range nodelabels.Cases() {
		changed := base.DeepCopy()
		c.Change(changed)
		check(c.Name, "UPDATE", agent, node, changed, base, c.Field)
	}
	removed := labelled.DeepCopy()
	delete(removed.Labels, names.NodeLabelFabricDomain)
	check("the domain label removed", "UPDATE", agent, node, removed, labelled, "")
	relabelled := labelled.DeepCopy()
	relabelled.Labels[names.NodeLabelFabricDomain] = "other.3"
	check("the domain label changed", "UPDATE", agent, node, relabelled, labelled, "")
	check("the domain label on another node", "UPDATE", agent, "tray-2", labelled, base, "only its own node")
	check("a token bound to no node", "UPDATE", agent, "", labelled, base, "name no node")
	check("a node created", "CREATE", agent, node, labelled, nil, "never create or delete")
	check("a node deleted", "DELETE", agent, node, nil, base, "never create or delete")
	unlabelled := base.DeepCopy()
	delete(unlabelled.Labels, "kubernetes.io/hostname")
	check("another label removed", "UPDATE", agent, node, unlabelled, base, "metadata.labels")
	check("someone else's request", "UPDATE", "system:serviceaccount:other:x", node, unlabelled, base, "")
}

func nodeOrNil(n *corev1.Node) runtime.Object {
	if n == nil {
		return nil
	}
	return n
}
