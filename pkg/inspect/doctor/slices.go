package doctor

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/pkg/names"
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
	pools := tallyPools(t.slices)
	names := make([]string, 0, len(pools))
	for n := range pools {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []Finding
	for _, name := range names {
		out = append(out, pools[name].findings(t.name, name)...)
	}
	return out
}

// poolTally is what a node's slices say of one pool.
type poolTally struct {
	newest     int64
	want       int64 // resourceSliceCount of the newest generation
	have       int   // slices of the newest generation
	devices    int
	older      int // slices of older generations
	olderGens  []int64
	countsDiff bool // the newest generation's slices disagree on the count
}

// incomplete: slices of the newest generation are missing, so the
// scheduler ignores the pool.
func (pl *poolTally) incomplete() bool { return int64(pl.have) < pl.want }

// tallyPools counts the slices of each pool, by generation.
func tallyPools(sl []resourceapi.ResourceSlice) map[string]*poolTally {
	pools := map[string]*poolTally{}
	for i := range sl {
		p := sl[i].Spec.Pool
		pl := pools[p.Name]
		if pl == nil {
			pl = &poolTally{newest: p.Generation}
			pools[p.Name] = pl
		}
		pl.newest = max(pl.newest, p.Generation)
	}
	for i := range sl {
		p := sl[i].Spec.Pool
		pl := pools[p.Name]
		if p.Generation != pl.newest {
			pl.older++
			if !slices.Contains(pl.olderGens, p.Generation) {
				pl.olderGens = append(pl.olderGens, p.Generation)
			}
			continue
		}
		if pl.have > 0 && pl.want != p.ResourceSliceCount {
			pl.countsDiff = true
		}
		pl.want = max(pl.want, p.ResourceSliceCount)
		pl.have++
		pl.devices += len(sl[i].Spec.Devices)
	}
	return pools
}

// poolsIncomplete says whether any pool of the slices is incomplete.
func poolsIncomplete(sl []resourceapi.ResourceSlice) bool {
	for _, pl := range tallyPools(sl) {
		if pl.incomplete() {
			return true
		}
	}
	return false
}

// findings judges pool name of node: complete, a count that disagrees,
// older generations left over, or all well.
func (pl *poolTally) findings(node, name string) []Finding {
	var out []Finding
	if pl.incomplete() {
		out = append(out, Finding{Status: StatusFail, Check: CheckSlices, Node: node,
			Detail: fmt.Sprintf("pool %s generation %d: %d of %d slices published (resourceSliceCount %d): the scheduler ignores an incomplete pool", name, pl.newest, pl.have, pl.want, pl.want),
			Fix:    fmt.Sprintf("the agent on %s is still publishing or failed to: check its log (/readyz is not ready until every slice is published)", node)})
	} else if int64(pl.have) > pl.want || pl.countsDiff {
		out = append(out, Finding{Status: StatusWarn, Check: CheckSlices, Node: node,
			Detail: fmt.Sprintf("pool %s generation %d: %d slices, but resourceSliceCount says %d", name, pl.newest, pl.have, pl.want),
			Fix:    fmt.Sprintf("restart the agent on %s so it republishes its pool; check that only one agent runs there", node)})
	}
	if pl.older > 0 {
		slices.Sort(pl.olderGens)
		var gens []string
		for _, g := range pl.olderGens {
			gens = append(gens, fmt.Sprint(g))
		}
		out = append(out, Finding{Status: StatusWarn, Check: CheckSlices, Node: node,
			Detail: fmt.Sprintf("pool %s: %d slices of older generation %s left over beside generation %d", name, pl.older, strings.Join(gens, ","), pl.newest),
			Fix:    fmt.Sprintf("the agent deletes them once generation %d is complete; if they stay, restart the agent on %s or delete them", pl.newest, node)})
	}
	if len(out) == 0 {
		out = append(out, Finding{Status: StatusPass, Check: CheckSlices, Node: node,
			Detail: fmt.Sprintf("pool %s generation %d: %d of %d slices published, %d devices", name, pl.newest, pl.have, pl.want, pl.devices)})
	}
	return out
}
