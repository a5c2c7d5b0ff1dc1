package nodepod

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNotAlive: a pod runs its daemon while pending or running with its
// container neither terminated, restarted nor stuck on something that
// never comes; each other case names why.
func TestNotAlive(t *testing.T) {
	now := metav1.NewTime(time.Unix(1, 0))
	status := func(s corev1.ContainerStatus) func(*corev1.Pod) {
		return func(p *corev1.Pod) { s.Name = "d"; p.Status.ContainerStatuses = []corev1.ContainerStatus{s} }
	}
	for _, tc := range []struct {
		name   string
		change func(*corev1.Pod)
		says   string
	}{
		{"new", func(*corev1.Pod) {}, ""},
		{"running", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }, ""},
		{"pulling", status(corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}), ""},
		{"another container's trouble", func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "other", RestartCount: 3}}
		}, ""},
		{"deleted", func(p *corev1.Pod) { p.DeletionTimestamp = &now }, "being deleted"},
		{"failed", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }, "phase Failed"},
		{"exited", status(corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 2}}}), "exit code 2"},
		{"restarted", status(corev1.ContainerStatus{RestartCount: 1}), "restarted 1 times"},
		{"no image", status(corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}), "ImagePullBackOff"},
	} {
		p := &corev1.Pod{}
		tc.change(p)
		got := NotAlive(p, "d")
		if (tc.says == "") != (got == "") || !strings.Contains(got, tc.says) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.says)
		}
	}
}
