package daemonpod

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/mps"
)

// neverRuns are the waiting reasons of a container that will not start
// without someone changing the pod or the node: the image cannot be pulled
// or named, or its configuration is refused.
var neverRuns = map[string]bool{
	"ErrImagePull":               true,
	"ImagePullBackOff":           true,
	"InvalidImageName":           true,
	"ErrImageNeverPull":          true,
	"CreateContainerConfigError": true,
}

// Alive implements mps.Launcher. Pending counts as alive: the Manager
// probes a new daemon's pipe until it answers and asks Alive in between,
// so only a pod that can never serve stops that wait early. An API error
// is not taken for a dead daemon, whose replacement would kill the
// clients of a live one: the Manager's probe of the pipe decides then.
func (p *Launcher) Alive(ctx context.Context, h mps.Handle) bool {
	ns, name, err := splitPod(h)
	if err != nil {
		return false
	}
	pod, err := p.c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Reading an MPS daemon pod; taking it for alive", "pod", h.Pod, "node", p.c.NodeName)
		return true
	}
	if h.PodUID != "" && string(pod.UID) != h.PodUID {
		return false
	}
	if why := notAlive(pod); why != "" {
		klog.FromContext(ctx).Info("MPS daemon pod is not alive", "pod", klog.KObj(pod), "node", p.c.NodeName, "reason", why)
		return false
	}
	return true
}

// notAlive says why pod does not run its daemon, or "" when it runs or may
// yet: phase Pending or Running, not being deleted, its container neither
// terminated nor restarted nor waiting for something that never comes.
func notAlive(pod *corev1.Pod) string {
	if pod.DeletionTimestamp != nil {
		return "being deleted"
	}
	if pod.Status.Phase != corev1.PodPending && pod.Status.Phase != corev1.PodRunning && pod.Status.Phase != "" {
		return "phase " + string(pod.Status.Phase)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != ContainerName {
			continue
		}
		switch {
		case cs.State.Terminated != nil:
			t := cs.State.Terminated
			return fmt.Sprintf("container terminated: %s, exit code %d %s", t.Reason, t.ExitCode, t.Message)
		case cs.RestartCount > 0:
			return fmt.Sprintf("container restarted %d times", cs.RestartCount)
		case cs.State.Waiting != nil && neverRuns[cs.State.Waiting.Reason]:
			return fmt.Sprintf("container waiting: %s: %s", cs.State.Waiting.Reason, cs.State.Waiting.Message)
		}
	}
	return ""
}
