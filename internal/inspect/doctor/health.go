package doctor

import (
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/inspect"
)

// nodeDevicesOf is the node's newest-generation devices.
func nodeDevicesOf(node string, sl []resourceapi.ResourceSlice) *inspect.NodeDevices {
	for _, nd := range inspect.NodesOf(&inspect.Snapshot{Slices: sl}) {
		if nd.Name == node {
			return nd
		}
	}
	return &inspect.NodeDevices{Name: node, CounterSets: map[inspect.DeviceKey]resourceapi.CounterSet{}}
}

// checkHealth: device taints. A node without slices has no devices to
// judge.
func checkHealth(_ *Input, t *target) []Finding {
	if len(t.slices) == 0 {
		return nil
	}
	return healthFindings(t.name, t.devices)
}

func healthFindings(node string, nd *inspect.NodeDevices) []Finding {
	var out []Finding
	groups := nd.GPUGroups()
	for _, g := range groups {
		var ts []inspect.Taint
		var on []string
		if g.Whole != nil {
			ts = inspect.TaintsOf(g.Whole)
			if len(ts) > 0 {
				on = append(on, g.Whole.Name)
			}
		}
		tainted := 0
		for _, p := range g.Partitions {
			pt := inspect.TaintsOf(p.Dev)
			if len(pt) > 0 {
				tainted++
			}
			ts = inspect.MergeTaints(ts, pt)
		}
		if len(ts) == 0 {
			continue
		}
		var parts []string
		for _, t := range ts {
			parts = append(parts, t.String())
		}
		where := ""
		if tainted > 0 {
			where = fmt.Sprintf(" (on %d of its %d partitions too)", tainted, len(g.Partitions))
			if len(on) == 0 {
				where = fmt.Sprintf(" (on %d of its %d partitions)", tainted, len(g.Partitions))
			}
		}
		out = append(out, Finding{Status: StatusWarn, Check: CheckHealth, Node: node,
			Detail: fmt.Sprintf("%s tainted: %s%s", g.Name, strings.Join(parts, ", "), where),
			Fix:    "see docs/health.md (what each taint means and when it clears); `tessera-sim inject --clear` on simulated nodes"})
	}
	if len(out) == 0 {
		out = append(out, Finding{Status: StatusPass, Check: CheckHealth, Node: node,
			Detail: fmt.Sprintf("no device taints on %d GPUs (%d devices)", len(groups), len(nd.Devices))})
	}
	return out
}
