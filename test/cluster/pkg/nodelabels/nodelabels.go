// Package nodelabels holds the changes an agent's token may ask of a node:
// the one the agent makes (its GPUs' fabric domain label on its own node)
// and the ways out a stolen token would try. The chart's admission policy
// must admit the first and refuse every other: test/chart evaluates the
// policy with Kubernetes' CEL, test/e2e's TestChart sends each as a dry-run
// patch to the real API server as the node-bound agent.
package nodelabels

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/tessera-gpu/tessera/internal/names"
)

// Domain is the label value the cases set: a GB200 tray's domain.
const Domain = "00000001-0000-0000-0000-000000000001.2"

// Case is one change of a node by its own agent.
type Case struct {
	Name   string
	Change func(n *corev1.Node)
	// Field is what the policy's refusal names; "" where it is admitted.
	Field string
}

// Cases are the agent's own change and the ways out of it.
func Cases() []Case {
	label := func(k, v string) func(*corev1.Node) {
		return func(n *corev1.Node) {
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			n.Labels[k] = v
		}
	}
	return []Case{
		{Name: "the domain label", Change: label(names.NodeLabelFabricDomain, Domain)},
		{Name: "another label", Change: label("node-role.kubernetes.io/control-plane", ""), Field: "metadata.labels"},
		{Name: "the domain label and another", Change: func(n *corev1.Node) {
			label(names.NodeLabelFabricDomain, Domain)(n)
			label("gpu.tessera.dev/trusted", "true")(n)
		}, Field: "metadata.labels"},
		{Name: "an annotation", Change: annotate("example.com/steer-to", "gpu-tenants"), Field: "metadata.annotations"},
		{Name: "the domain label and the IMEX address", Change: func(n *corev1.Node) {
			label(names.NodeLabelFabricDomain, Domain)(n)
			annotate(names.NodeAnnotationIMEXAddress, "127.0.0.2")(n)
		}},
		{Name: "the IMEX address and another annotation", Change: func(n *corev1.Node) {
			annotate(names.NodeAnnotationIMEXAddress, "127.0.0.2")(n)
			annotate("example.com/steer-to", "gpu-tenants")(n)
		}, Field: "metadata.annotations"},
		{Name: "a taint removed or added", Change: func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "evict", Effect: corev1.TaintEffectNoExecute})
		}, Field: "spec"},
		{Name: "unschedulable", Change: func(n *corev1.Node) { n.Spec.Unschedulable = !n.Spec.Unschedulable }, Field: "spec"},
		{Name: "a finalizer", Change: func(n *corev1.Node) { n.Finalizers = append(n.Finalizers, "example.com/hold") }, Field: "metadata.finalizers"},
		{Name: "an owner", Change: func(n *corev1.Node) {
			n.OwnerReferences = append(n.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "Namespace", Name: "default", UID: "u"})
		}, Field: "metadata.ownerReferences"},
	}
}

// annotate sets annotation k to v.
func annotate(k, v string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[k] = v
	}
}

// Patch is the strategic merge patch that turns node into what c makes of
// it, as a client would send it.
func Patch(node *corev1.Node, c Case) ([]byte, error) {
	before, err := json.Marshal(node)
	if err != nil {
		return nil, err
	}
	changed := node.DeepCopy()
	c.Change(changed)
	after, err := json.Marshal(changed)
	if err != nil {
		return nil, err
	}
	p, err := strategicpatch.CreateTwoWayMergePatch(before, after, corev1.Node{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Name, err)
	}
	return p, nil
}
