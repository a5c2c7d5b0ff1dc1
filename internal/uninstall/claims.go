package uninstall

import (
	"context"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Driver is the DRA driver whose claims uninstall looks at.
const Driver = "gpu.tessera.dev"

// InUse is a claim of the driver that a pod holds.
type InUse struct {
	Namespace, Name string
	Nodes           []string // the pools (nodes) of its devices
	Pods            []string // reservedFor
}

func (c InUse) String() string {
	return fmt.Sprintf("%s/%s on %s (pods %s)", c.Namespace, c.Name, strings.Join(c.Nodes, ","), strings.Join(c.Pods, ","))
}

// ClaimsInUse lists the claims with a device of Driver on one of nodes
// (all nodes when nodes is nil) that a pod still reserves.
func ClaimsInUse(ctx context.Context, client kubernetes.Interface, nodes map[string]bool) ([]InUse, error) {
	list, err := client.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list resource claims: %w", err)
	}
	var out []InUse
	for _, rc := range list.Items {
		if rc.Status.Allocation == nil || len(rc.Status.ReservedFor) == 0 {
			continue
		}
		on := map[string]bool{}
		for _, r := range rc.Status.Allocation.Devices.Results {
			if r.Driver == Driver && (nodes == nil || nodes[r.Pool]) {
				on[r.Pool] = true
			}
		}
		if len(on) == 0 {
			continue
		}
		c := InUse{Namespace: rc.Namespace, Name: rc.Name}
		for n := range on {
			c.Nodes = append(c.Nodes, n)
		}
		sort.Strings(c.Nodes)
		for _, ref := range rc.Status.ReservedFor {
			c.Pods = append(c.Pods, ref.Name)
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// Check refuses (an error naming them) while claims of the release's nodes
// are in use: the nodes that run a pod of agentSelector in namespace.
func Check(ctx context.Context, client kubernetes.Interface, namespace, agentSelector string) error {
	pods, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: agentSelector})
	if err != nil {
		return fmt.Errorf("list the agents' pods (%s): %w", agentSelector, err)
	}
	nodes := map[string]bool{}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			nodes[p.Spec.NodeName] = true
		}
	}
	inUse, err := ClaimsInUse(ctx, client, nodes)
	if err != nil {
		return err
	}
	if len(inUse) == 0 {
		return nil
	}
	lines := make([]string, len(inUse))
	for i, c := range inUse {
		lines[i] = "  " + c.String()
	}
	return fmt.Errorf("uninstall refused: %d claims of %s are in use on this release's nodes; delete their pods, then uninstall again:\n%s",
		len(inUse), Driver, strings.Join(lines, "\n"))
}
