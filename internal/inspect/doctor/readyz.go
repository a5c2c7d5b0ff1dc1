package doctor

import (
	"fmt"
)

// checkReadyz: the agent's /readyz. A node that does not exist has no
// agent to ask.
func checkReadyz(in *Input, t *target) []Finding {
	if t.node == nil && in.NodesErr == "" {
		return nil
	}
	return []Finding{readyzFinding(in, t.name)}
}

func readyzFinding(in *Input, node string) Finding {
	f := Finding{Check: CheckReadyz, Node: node}
	r, ok := in.Readiness[node]
	if !ok {
		f.Status, f.Detail = StatusWarn, "not checked"
		f.Fix = "give the agent's address with --metrics-url " + node + "=https://HOST:9478/metrics"
		return f
	}
	via := ""
	if r.Via != "" {
		via = " (" + r.Via + ")"
	}
	switch r.State {
	case ReadyOK:
		f.Status, f.Detail = StatusPass, "ready"+via
	case ReadyFailed:
		f.Status, f.Detail = StatusFail, "not ready"+via+": "+truncateMessage(r.Detail, maxMessage)
		f.Fix = fmt.Sprintf("the agent on %s is ready once registered with the kubelet and every slice is published: check its log (kubectl logs on its pod)", node)
	default:
		f.Status, f.Detail = StatusWarn, r.Detail+via
		f.Fix = "give the agent's address with --metrics-url " + node + "=https://HOST:9478/metrics"
	}
	return f
}
