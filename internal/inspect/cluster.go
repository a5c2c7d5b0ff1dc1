package inspect

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/internal/names"
)

// FromCluster lists the driver's ResourceSlices (of node only, when node is
// not empty) and every ResourceClaim in every namespace: a device's holder
// may live in any namespace. It only lists; it never writes.
func FromCluster(ctx context.Context, c kubernetes.Interface, node string) (*Snapshot, error) {
	sel := fields.Set{"spec.driver": names.DriverName}
	if node != "" {
		sel["spec.nodeName"] = node
	}
	slices, err := c.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: sel.AsSelector().String()})
	if err != nil {
		return nil, fmt.Errorf("listing ResourceSlices: %w", err)
	}
	claims, err := c.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing ResourceClaims: %w", err)
	}
	s := &Snapshot{Slices: slices.Items, Claims: claims.Items, Source: "the cluster"}
	if len(s.Slices) == 0 {
		if node != "" {
			return nil, fmt.Errorf("no ResourceSlices of driver %s on node %s", names.DriverName, node)
		}
		return nil, fmt.Errorf("no ResourceSlices of driver %s in the cluster", names.DriverName)
	}
	return s, nil
}
