package daemonpod

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/internal/names"
)

// Peers are the IMEX addresses of the nodes labelled with domain, sorted
// by node name: the daemon's nodes file, the same on every node of the
// domain. A labelled node without an address is an error naming it: its
// daemon would be missing from every list.
func Peers(ctx context.Context, client kubernetes.Interface, domain string) ([]string, error) {
	sel := labels.SelectorFromSet(labels.Set{names.NodeLabelFabricDomain: domain})
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("list the nodes of multi-node NVLink domain %s (label %s): %w", domain, names.NodeLabelFabricDomain, err)
	}
	nodes := list.Items
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	var out []string
	for i := range nodes {
		n := &nodes[i]
		if n.Labels[names.NodeLabelFabricDomain] != domain {
			continue // a server (or a fake) that ignored the selector
		}
		a := Address(n)
		if a == "" {
			return nil, fmt.Errorf("node %s of multi-node NVLink domain %s has no IMEX address: no %s annotation and no InternalIP in status.addresses", n.Name, domain, names.NodeAnnotationIMEXAddress)
		}
		out = append(out, a)
	}
	return out, nil
}

// Address is where node's IMEX daemon is reached: its
// gpu.tessera.dev/imex-address annotation, else its first InternalIP.
func Address(n *corev1.Node) string {
	if a := n.Annotations[names.NodeAnnotationIMEXAddress]; a != "" {
		return a
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP && a.Address != "" {
			return a.Address
		}
	}
	return ""
}
