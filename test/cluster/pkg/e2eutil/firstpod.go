package e2eutil

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// FirstPod does what a user does the moment cluster-up returns: create a
// pod in the default namespace (the README's "Try it by hand"). It must be admitted
// at once (no "serviceaccount default not found") and then run; the pod is
// deleted afterwards.
func FirstPod(ctx context.Context, cluster *localcluster.Config, client kubernetes.Interface) error {
	image, pull := "registry.k8s.io/pause:3.10", corev1.PullIfNotPresent
	if cluster.RuntimeOf() == localcluster.RuntimeContainerd {
		image, pull = localcluster.ProbeImage, corev1.PullNever
	}
	pods := client.CoreV1().Pods(metav1.NamespaceDefault)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "first-pod"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: image, ImagePullPolicy: pull}},
			// Any node: this is about the control plane, not a GPU.
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		},
	}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create pod default/first-pod right after cluster up: %w", err)
	}
	defer func() {
		zero := int64(0)
		_ = pods.Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	}()
	return scenario.Poll(ctx, 90*time.Second, func() (bool, string) {
		p, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodRunning, "pod default/first-pod is " + string(p.Status.Phase)
	})
}
