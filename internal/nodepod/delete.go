package nodepod

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// DeleteGrace is the grace period of Delete. Not 0: a pod deleted with 0
// leaves the API at once, before the kubelet stops its container, so its
// absence would not say that the daemon is gone. With 1 the kubelet kills
// the container and only then removes the pod.
const DeleteGrace = int64(1)

// Delete deletes pod namespace/name while its UID is uid and waits, up to
// timeout, until no pod of that name and UID is left. A pod already gone,
// or replaced under the name, is not an error.
func Delete(ctx context.Context, client kubernetes.Interface, namespace, name string, uid types.UID, timeout time.Duration) error {
	pods := client.CoreV1().Pods(namespace)
	grace := DeleteGrace
	opts := metav1.DeleteOptions{GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &uid}}
	err := pods.Delete(ctx, name, opts)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		// The name holds another pod: ours is gone.
		return nil
	case err != nil:
		return fmt.Errorf("delete: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	delay := 20 * time.Millisecond
	for {
		cur, err := pods.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && cur.UID != uid) {
			return nil
		}
		select {
		case <-ctx.Done():
			why := "still there"
			if err != nil {
				why = err.Error()
			}
			return fmt.Errorf("pod %s/%s not gone after %s: %s", namespace, name, timeout, why)
		case <-time.After(delay):
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}
