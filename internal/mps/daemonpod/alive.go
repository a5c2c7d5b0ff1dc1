package daemonpod

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/mps"
	"github.com/tessera-gpu/tessera/internal/nodepod"
)

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

// notAlive says why pod does not run its daemon, or "" when it runs or
// may yet (nodepod.NotAlive).
func notAlive(pod *corev1.Pod) string { return nodepod.NotAlive(pod, ContainerName) }
