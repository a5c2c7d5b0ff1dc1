package daemonpod

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/tessera-gpu/tessera/internal/mps"
)

// Find implements mps.Launcher: the live daemon pods of this node whose
// directory is under root, oldest first (creation time, then name).
func (p *Launcher) Find(ctx context.Context, root string) ([]mps.Found, error) {
	root = filepath.Clean(root)
	list, err := p.c.Client.CoreV1().Pods(p.c.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: LabelName + "=" + AppName,
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", p.c.NodeName).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("daemonpod: list MPS daemon pods of node %s in namespace %s: %w", p.c.NodeName, p.c.Namespace, err)
	}
	var pods []*corev1.Pod
	for i := range list.Items {
		pod := &list.Items[i]
		// Selectors again: a server (or a fake) may not apply them all.
		if pod.Spec.NodeName != p.c.NodeName || pod.Labels[LabelName] != AppName || pod.Annotations[AnnotationID] == "" {
			continue
		}
		if !under(root, pod.Annotations[AnnotationDir]) || notAlive(pod) != "" {
			continue
		}
		pods = append(pods, pod)
	}
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i].CreationTimestamp, pods[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return pods[i].Name < pods[j].Name
	})
	out := make([]mps.Found, 0, len(pods))
	for _, pod := range pods {
		out = append(out, mps.Found{
			ID:      pod.Annotations[AnnotationID],
			Handle:  mps.Handle{Pod: pod.Namespace + "/" + pod.Name, PodUID: string(pod.UID)},
			Devices: devices(pod),
		})
	}
	return out, nil
}

// under reports whether dir is strictly below root.
func under(root, dir string) bool {
	if dir == "" || !filepath.IsAbs(dir) {
		return false
	}
	rel, err := filepath.Rel(root, filepath.Clean(dir))
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../")
}

// devices are the UUIDs the daemon container serves.
func devices(pod *corev1.Pod) []string {
	for _, c := range pod.Spec.Containers {
		if c.Name != ContainerName {
			continue
		}
		for _, e := range c.Env {
			if e.Name == envDevices && e.Value != "" {
				return strings.Split(e.Value, ",")
			}
		}
	}
	return nil
}
