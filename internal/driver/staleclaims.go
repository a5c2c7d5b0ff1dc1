package driver

import (
	"context"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// getClaim is the claims manager's look at the holder of a device another
// claim was allocated (docs/operating.md#stale-claims): one GET by namespace
// and name, which the agent's RBAC allows (it may not list or watch
// claims). Nil without a client: such a prepare is refused, as before.
func getClaim(c kubernetes.Interface) func(ctx context.Context, namespace, name string) (*resourceapi.ResourceClaim, error) {
	if c == nil {
		return nil
	}
	return func(ctx context.Context, namespace, name string) (*resourceapi.ResourceClaim, error) {
		return c.ResourceV1().ResourceClaims(namespace).Get(ctx, name, metav1.GetOptions{})
	}
}
