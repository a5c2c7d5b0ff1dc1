package doctor

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/tessera-gpu/tessera/internal/channelpool"
	"github.com/tessera-gpu/tessera/internal/names"
)

// CheckIMEX is the check of a node in a multi-node NVLink domain.
const CheckIMEX = "imex"

// imexNotReady is what a channel's prepare says while the node's IMEX
// daemon is not ready (internal/claims).
const imexNotReady = "IMEX daemon is not ready"

// checkIMEX: a node in a multi-node NVLink domain (its label) has its
// domain's IMEX channels published where the cluster offers any, and no
// prepare of a channel waited for the node's IMEX daemon in the last hour.
// A node of no domain gets no finding.
func checkIMEX(in *Input, t *target) []Finding {
	if t.node == nil || t.node.Labels[names.NodeLabelFabricDomain] == "" {
		return nil
	}
	domain := t.node.Labels[names.NodeLabelFabricDomain]
	offered, used := channelCounts(in)
	f := Finding{Check: CheckIMEX, Node: t.name}
	if e := lastIMEXWait(t.events); e != nil {
		f.Status = StatusFail
		f.Detail = fmt.Sprintf("a prepare of an IMEX channel waited for the node's IMEX daemon in the last hour (pod %s/%s): %s", e.InvolvedObject.Namespace, e.InvolvedObject.Name, truncateMessage(e.Message, maxMessage))
		f.Fix = "on the node: nvidia-imex-ctl -q, and the nvidia-imex service's log; the agent's tessera_imex_daemon_ready says when it answers READY again"
		return []Finding{f}
	}
	switch {
	case offered[domain] > 0:
		f.Status = StatusPass
		f.Detail = fmt.Sprintf("domain %s: %d IMEX channels published, %d allocated", domain, offered[domain], used[domain])
	case len(offered) > 0:
		f.Status = StatusWarn
		f.Detail = fmt.Sprintf("the node is in domain %s, whose IMEX channels no agent publishes, while other domains' are", domain)
		f.Fix = "run the agents of the domain's nodes with imex.channels (--imex-channels), as the others'"
	default:
		f.Status = StatusPass
		f.Detail = fmt.Sprintf("domain %s; the cluster offers no IMEX channels (imex.channels is 0)", domain)
	}
	return []Finding{f}
}

// channelCounts are the channels each domain's pool publishes and how many
// of them claims hold.
func channelCounts(in *Input) (offered, used map[string]int) {
	offered, used = map[string]int{}, map[string]int{}
	for i := range in.Slices {
		if d, ok := channelpool.DomainOf(in.Slices[i].Spec.Pool.Name); ok {
			offered[d] += len(in.Slices[i].Spec.Devices)
		}
	}
	for i := range in.Claims {
		a := in.Claims[i].Status.Allocation
		if a == nil {
			continue
		}
		for _, r := range a.Devices.Results {
			if d, ok := channelpool.DomainOf(r.Pool); ok && r.Driver == names.DriverName {
				used[d]++
			}
		}
	}
	return offered, used
}

// lastIMEXWait is the newest of events that says the node's IMEX daemon
// was not ready, or nil.
func lastIMEXWait(events []corev1.Event) *corev1.Event {
	var last *corev1.Event
	for i := range events {
		e := &events[i]
		if strings.Contains(e.Message, imexNotReady) && (last == nil || eventTime(e).After(eventTime(last))) {
			last = e
		}
	}
	return last
}
