package nodepod

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
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

// NotAlive says why pod does not run its daemon in container, or "" when
// it runs or may yet: phase Pending or Running, not being deleted, the
// container neither terminated nor restarted nor waiting for something
// that never comes. The daemon pods never restart (RestartPolicy Never):
// a restarted container would be a daemon its owner did not start.
func NotAlive(pod *corev1.Pod, container string) string {
	if pod.DeletionTimestamp != nil {
		return "being deleted"
	}
	if pod.Status.Phase != corev1.PodPending && pod.Status.Phase != corev1.PodRunning && pod.Status.Phase != "" {
		return "phase " + string(pod.Status.Phase)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != container {
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
