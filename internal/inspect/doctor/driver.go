package doctor

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/tessera-gpu/tessera/internal/driverroot"
)

// maxDriverMessage bounds the quoted agent error, which lists every path
// tried.
const maxDriverMessage = 600

// checkDriver: the node's NVIDIA driver as its agent found it. An agent
// that finds libnvidia-ml or the MPS control program missing under its
// driver root stops at start with driverroot's error, which the kubelet
// keeps as its container's termination message (the chart's
// FallbackToLogsOnError): read from the agent pods' status, so the agent
// needs no right to report it. Every agent pod is looked at, not only the
// target nodes': an agent that stops at start publishes no slices, so its
// node would not be a target.
func checkDriver(in *Input, _ []*target) []Finding {
	if in.AgentPodsErr != "" {
		return []Finding{{Status: StatusWarn, Check: CheckDriver, Detail: "could not list agent pods (" + in.AgentPodsErr + "); the node's driver not checked",
			Fix: "kubectl tessera doctor needs list on pods to read the agents' status"}}
	}
	nodes := make([]string, 0, len(in.AgentPods))
	for n := range in.AgentPods {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	var out []Finding
	pods := 0
	for _, n := range nodes {
		pods += len(in.AgentPods[n])
		if msg := driverError(in.AgentPods[n]); msg != "" {
			out = append(out, Finding{Status: StatusFail, Check: CheckDriver, Node: n,
				Detail: "node " + n + ": " + truncateMessage(msg, maxDriverMessage),
				Fix:    "set the chart's nvidiaDriverRoot to where this node's driver is (/ installed on the host, /run/nvidia/driver under the GPU Operator) and check that it holds the driver's libraries and programs (docs/operating.md, The node's driver)"})
		}
	}
	if len(out) == 0 && pods > 0 {
		out = append(out, Finding{Status: StatusPass, Check: CheckDriver, Detail: fmt.Sprintf("no agent reports a driver file missing (%d agent pods)", pods)})
	}
	return out
}

// driverError is the driver root error one of pods' containers last
// stopped with, "" for none.
func driverError(pods []corev1.Pod) string {
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
				if t == nil {
					continue
				}
				if msg := cutDriverError(t.Message); msg != "" {
					return msg
				}
			}
		}
	}
	return ""
}

// cutDriverError cuts driverroot's error out of an agent's last words:
// from its marker to the parenthesis of the paths tried that closes it.
func cutDriverError(s string) string {
	i := strings.Index(s, driverroot.Marker)
	if i < 0 {
		return ""
	}
	s = s[i:]
	open := strings.Index(s, "(tried ")
	if open < 0 {
		return firstLine(s)
	}
	depth := 0
	for j := open; j < len(s); j++ {
		switch s[j] {
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				return s[:j+1]
			}
		case '\n':
			return s[:j]
		}
	}
	return s
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
