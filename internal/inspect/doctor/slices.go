package doctor

import (
	"fmt"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// checkAnySlices: some node publishes the driver's ResourceSlices.
func checkAnySlices(_ *Input, targets []*target) []Finding {
	if len(targets) > 0 {
		return nil
	}
	return []Finding{{Status: StatusFail, Check: CheckSlices,
		Detail: fmt.Sprintf("no ResourceSlices of driver %s in the cluster: no agent is running or registered", names.DriverName),
		Fix:    "install the chart (deployments/helm/tessera) or start tessera-kubelet-plugin on the GPU nodes, then check its log"}}
}

// checkSlices: the node's pool is published, completely, without
// leftovers.
func checkSlices(_ *Input, t *target) []Finding {
	if len(t.slices) == 0 {
		return []Finding{{Status: StatusFail, Check: CheckSlices, Node: t.name,
			Detail: fmt.Sprintf("no ResourceSlices: the agent is not running or not registered on %s", t.name),
			Fix:    fmt.Sprintf("check the agent pod (or process) on %s and its log: it publishes the slices once it starts", t.name)}}
	}
	pools := publish.Pools(t.slices, names.DriverName)
	poolNames := make([]string, 0, len(pools))
	for n := range pools {
		poolNames = append(poolNames, n)
	}
	sort.Strings(poolNames)
	var out []Finding
	for _, name := range poolNames {
		out = append(out, poolFindings(pools[name], t.name, name)...)
	}
	return out
}

// poolsIncomplete says whether any pool of the slices is incomplete.
func poolsIncomplete(sl []resourceapi.ResourceSlice) bool {
	for _, pl := range publish.Pools(sl, names.DriverName) {
		if pl.Missing() {
			return true
		}
	}
	return false
}

// findings judges pool name of node: complete, a count that disagrees,
// older generations left over, or all well.
func poolFindings(pl *publish.PoolState, node, name string) []Finding {
	var out []Finding
	if pl.Missing() {
		out = append(out, Finding{Status: StatusFail, Check: CheckSlices, Node: node,
			Detail: fmt.Sprintf("pool %s generation %d: %d of %d slices published (resourceSliceCount %d): the scheduler ignores an incomplete pool", name, pl.Generation, pl.Slices, pl.Want, pl.Want),
			Fix:    fmt.Sprintf("the agent on %s is still publishing or failed to: check its log (/readyz is not ready until every slice is published)", node)})
	} else if int64(pl.Slices) > pl.Want || pl.CountsDiffer {
		out = append(out, Finding{Status: StatusWarn, Check: CheckSlices, Node: node,
			Detail: fmt.Sprintf("pool %s generation %d: %d slices, but resourceSliceCount says %d", name, pl.Generation, pl.Slices, pl.Want),
			Fix:    fmt.Sprintf("restart the agent on %s so it republishes its pool; check that only one agent runs there", node)})
	}
	if pl.Older > 0 {
		var gens []string
		for _, g := range pl.OlderGenerations {
			gens = append(gens, fmt.Sprint(g))
		}
		out = append(out, Finding{Status: StatusWarn, Check: CheckSlices, Node: node,
			Detail: fmt.Sprintf("pool %s: %d slices of older generation %s left over beside generation %d", name, pl.Older, strings.Join(gens, ","), pl.Generation),
			Fix:    fmt.Sprintf("the agent deletes them once generation %d is complete; if they stay, restart the agent on %s or delete them", pl.Generation, node)})
	}
	if len(out) == 0 {
		out = append(out, Finding{Status: StatusPass, Check: CheckSlices, Node: node,
			Detail: fmt.Sprintf("pool %s generation %d: %d of %d slices published, %d devices", name, pl.Generation, pl.Slices, pl.Want, pl.Devices)})
	}
	return out
}
