package nodepod

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Owner is the owner reference to a Node, read once: deleting the node
// collects its daemon pods, deleting the agent's pod does not. The zero
// value is ready to use and safe for concurrent use.
type Owner struct {
	mu  sync.Mutex
	ref *metav1.OwnerReference
}

// Get returns the reference to node, reading the Node at the first call.
func (o *Owner) Get(ctx context.Context, client kubernetes.Interface, node string) (metav1.OwnerReference, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ref != nil {
		return *o.ref, nil
	}
	n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return metav1.OwnerReference{}, fmt.Errorf("get node %s, the owner of its daemon pods: %w", node, err)
	}
	no := false
	o.ref = &metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID, BlockOwnerDeletion: &no}
	return *o.ref, nil
}
