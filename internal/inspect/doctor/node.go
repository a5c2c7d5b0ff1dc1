package doctor

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/tessera-gpu/tessera/internal/names"
)

// checkNode: the node exists and is Ready.
func checkNode(in *Input, t *target) []Finding {
	return []Finding{nodeFinding(in, t.name, t.node, len(t.slices))}
}

func nodeFinding(in *Input, name string, node *corev1.Node, nslices int) Finding {
	f := Finding{Check: CheckNode, Node: name}
	if node == nil {
		if in.NodesErr != "" {
			f.Status, f.Detail = StatusWarn, "could not read the Node: "+in.NodesErr
			f.Fix = "run as a user allowed to get/list nodes"
			return f
		}
		f.Status = StatusFail
		if nslices > 0 {
			f.Detail = fmt.Sprintf("node %s does not exist but %d ResourceSlices name it (stale slices)", name, nslices)
			f.Fix = fmt.Sprintf("kubectl delete resourceslices --field-selector spec.driver=%s,spec.nodeName=%s (the agent cleans up its own when it runs)", names.DriverName, name)
		} else {
			f.Detail = fmt.Sprintf("node %s does not exist", name)
			f.Fix = "check the node name: kubectl get nodes"
		}
		return f
	}
	var ready *corev1.NodeCondition
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == corev1.NodeReady {
			ready = &node.Status.Conditions[i]
		}
	}
	switch {
	case ready == nil:
		f.Status, f.Detail = StatusFail, "the node has no Ready condition: its kubelet never reported"
		f.Fix = fmt.Sprintf("kubectl describe node %s; check the kubelet on it", name)
	case ready.Status != corev1.ConditionTrue:
		f.Status = StatusFail
		f.Detail = fmt.Sprintf("NotReady (Ready=%s", ready.Status)
		if ready.Reason != "" {
			f.Detail += ", " + ready.Reason
		}
		f.Detail += ")"
		if ready.Message != "" {
			f.Detail += ": " + truncateMessage(ready.Message, maxMessage)
		}
		f.Fix = fmt.Sprintf("kubectl describe node %s; the kubelet must run to prepare claims", name)
	case node.Spec.Unschedulable:
		f.Status, f.Detail = StatusWarn, "Ready but cordoned (spec.unschedulable): no new pods land here"
		f.Fix = fmt.Sprintf("kubectl uncordon %s when its maintenance is done", name)
	default:
		f.Status, f.Detail = StatusPass, "Ready"
		if v := node.Status.NodeInfo.KubeletVersion; v != "" {
			f.Detail += ", kubelet " + v
		}
	}
	return f
}
