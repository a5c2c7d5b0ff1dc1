package uninstall

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/channelpool"
	"github.com/tessera-gpu/tessera/internal/names"
)

// DeleteChannelPools deletes the driver's IMEX channel pools: the slices
// of pools imex-<domain> that name no node. The kubelet removes a node's
// own slices once its agent is gone; a domain's pool, published by
// whichever of the domain's agents held the lease and owned by that Node,
// would otherwise outlive every agent and keep offering channels nobody
// prepares. Run once the agents are gone: a running one would publish
// them again.
func DeleteChannelPools(ctx context.Context, client kubernetes.Interface) error {
	slices := client.ResourceV1().ResourceSlices()
	list, err := slices.List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.driver", names.DriverName).String()})
	if err != nil {
		return fmt.Errorf("list the driver's ResourceSlices: %w", err)
	}
	for _, s := range list.Items {
		if _, ok := channelpool.DomainOf(s.Spec.Pool.Name); !ok || s.Spec.NodeName != nil && *s.Spec.NodeName != "" || s.Spec.Driver != names.DriverName {
			continue
		}
		if err := slices.Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID}}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete IMEX channel pool slice %s (pool %s): %w", s.Name, s.Spec.Pool.Name, err)
		}
		klog.FromContext(ctx).Info("Deleted an IMEX channel pool's slice", "slice", s.Name, "pool", s.Spec.Pool.Name)
	}
	return nil
}
