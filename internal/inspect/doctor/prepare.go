package doctor

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/names"
)

// checkPrepare: claims stuck in prepare (Prepared=False) and pods with
// failed-prepare events.
func checkPrepare(in *Input, t *target) []Finding {
	return prepareFindings(in, t.name, t.slices, t.events)
}

// checkUnplacedEvents: the failed-prepare events of pods whose node is
// unknown.
func checkUnplacedEvents(unplaced []corev1.Event) []Finding {
	if len(unplaced) == 0 {
		return nil
	}
	return eventFindings("", unplaced)
}

func prepareFindings(in *Input, node string, sl []resourceapi.ResourceSlice, events []corev1.Event) []Finding {
	pools := map[string]bool{node: true}
	for i := range sl {
		pools[sl[i].Spec.Pool.Name] = true
	}
	var out []Finding
	stuck := stuckClaims(in, node, pools)
	sort.SliceStable(stuck, func(a, b int) bool { return stuck[a].Detail < stuck[b].Detail })
	out = append(out, capFindings(stuck, StatusFail, CheckPrepare, node, "claims with Prepared=False")...)
	if in.ClaimsErr != "" {
		out = append(out, Finding{Status: StatusWarn, Check: CheckPrepare, Node: node,
			Detail: "could not list ResourceClaims: " + in.ClaimsErr,
			Fix:    "run as a user allowed to list resourceclaims in all namespaces"})
	}
	out = append(out, eventFindings(node, events)...)
	if in.EventsErr != "" {
		out = append(out, Finding{Status: StatusWarn, Check: CheckPrepare, Node: node,
			Detail: "could not list events: " + in.EventsErr,
			Fix:    "run as a user allowed to list events in all namespaces"})
	}
	if len(out) == 0 {
		out = append(out, Finding{Status: StatusPass, Check: CheckPrepare, Node: node,
			Detail: fmt.Sprintf("no claim with %s=False; no %s events in the last hour", names.ConditionPrepared, ReasonFailedPrepare)})
	}
	return out
}

// stuckClaims is a FAIL for each allocated claim with Prepared=False on a
// device of pools.
func stuckClaims(in *Input, node string, pools map[string]bool) []Finding {
	var stuck []Finding
	for i := range in.Claims {
		c := &in.Claims[i]
		if c.Status.Allocation == nil {
			continue
		}
		var devs []string
		msg := ""
		for _, ds := range c.Status.Devices {
			if ds.Driver != names.DriverName || !pools[ds.Pool] {
				continue
			}
			for _, cond := range ds.Conditions {
				if cond.Type != names.ConditionPrepared || cond.Status != metav1.ConditionFalse {
					continue
				}
				if !slices.Contains(devs, ds.Device) {
					devs = append(devs, ds.Device)
				}
				if msg == "" {
					msg = cond.Message
					if cond.Reason != "" {
						msg = cond.Reason + ": " + msg
					}
				}
			}
		}
		if len(devs) == 0 {
			continue
		}
		stuck = append(stuck, Finding{Status: StatusFail, Check: CheckPrepare, Node: node,
			Detail: fmt.Sprintf("claim %s/%s: Prepared=False on %s: %s", c.Namespace, c.Name, strings.Join(devs, ","), truncateMessage(msg, maxMessage)),
			Fix:    fmt.Sprintf("kubectl describe resourceclaim -n %s %s; the agent's log on %s; the kubelet retries prepare while the pod waits", c.Namespace, c.Name, node)})
	}
	return stuck
}

// prepareEvents returns the recent failed-prepare pod events by node, and
// those whose node is unknown.
func (in *Input) prepareEvents() (map[string][]corev1.Event, []corev1.Event) {
	since := in.now().Add(-EventWindow)
	byNode := map[string][]corev1.Event{}
	var unplaced []corev1.Event
	for _, e := range in.Events {
		if e.Reason != ReasonFailedPrepare || e.InvolvedObject.Kind != "Pod" || eventTime(&e).Before(since) {
			continue
		}
		node := e.Source.Host
		if node == "" && e.ReportingController == "kubelet" {
			node = e.ReportingInstance
		}
		if node == "" {
			node = in.PodNodes[e.InvolvedObject.Namespace+"/"+e.InvolvedObject.Name]
		}
		if node == "" {
			unplaced = append(unplaced, e)
			continue
		}
		byNode[node] = append(byNode[node], e)
	}
	return byNode, unplaced
}

// eventTime is when the event last happened.
func eventTime(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// eventFindings is one WARN per pod: how often and the latest message.
func eventFindings(node string, events []corev1.Event) []Finding {
	type podEvents struct {
		count int32
		last  time.Time
		msg   string
	}
	byPod := map[string]*podEvents{}
	for i := range events {
		e := &events[i]
		k := e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
		p := byPod[k]
		if p == nil {
			p = &podEvents{}
			byPod[k] = p
		}
		n := max(e.Count, 1)
		if e.Series != nil && e.Series.Count > n {
			n = e.Series.Count
		}
		p.count += n
		if t := eventTime(e); p.msg == "" || t.After(p.last) {
			p.last, p.msg = t, e.Message
		}
	}
	pods := make([]string, 0, len(byPod))
	for k := range byPod {
		pods = append(pods, k)
	}
	sort.Strings(pods)
	var out []Finding
	for _, k := range pods {
		p := byPod[k]
		ns, name, _ := strings.Cut(k, "/")
		where := ""
		if node == "" {
			where = " (node unknown)"
		}
		out = append(out, Finding{Status: StatusWarn, Check: CheckPrepare, Node: node,
			Detail: fmt.Sprintf("pod %s%s: %s x%d in the last hour, latest: %s", k, where, ReasonFailedPrepare, p.count, truncateMessage(p.msg, maxMessage)),
			Fix:    fmt.Sprintf("kubectl describe pod -n %s %s; the claim's status (kubectl describe resourceclaim) and the agent's log", ns, name)})
	}
	return capFindings(out, StatusWarn, CheckPrepare, node, "pods with "+ReasonFailedPrepare+" events")
}
