package scenario

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// AdminAccessLabel is the namespace label without which the API server
// refuses a claim whose request asks adminAccess (DRAAdminAccess): only a
// namespace an administrator marked may watch devices other claims hold.
const AdminAccessLabel = "resource.kubernetes.io/admin-access"

// AsksAdminAccess reports whether a claim or claim template of the
// scenario has a request with adminAccess: true.
func (sc *Scenario) AsksAdminAccess() bool {
	for _, c := range sc.Claims {
		if asksAdmin(c.Spec) {
			return true
		}
	}
	for _, t := range sc.Templates {
		if asksAdmin(t.Spec.Spec) {
			return true
		}
	}
	return false
}

func asksAdmin(spec resourceapi.ResourceClaimSpec) bool {
	for _, r := range spec.Devices.Requests {
		if r.Exactly != nil && r.Exactly.AdminAccess != nil && *r.Exactly.AdminAccess {
			return true
		}
	}
	return false
}

// AllowAdminAccess labels namespace ns with AdminAccessLabel, as a cluster
// administrator marks a monitoring namespace.
func AllowAdminAccess(ctx context.Context, client kubernetes.Interface, ns string) error {
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, AdminAccessLabel)
	if _, err := client.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("label namespace %s %s=true: %w", ns, AdminAccessLabel, err)
	}
	return nil
}
