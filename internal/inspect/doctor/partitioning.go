package doctor

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/tessera-gpu/tessera/internal/inspect"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// checkPartitioning: the node label against what is published. A node
// without slices has no devices to judge.
func checkPartitioning(_ *Input, t *target) []Finding {
	if len(t.slices) == 0 {
		return nil
	}
	return []Finding{partitioningFinding(t.name, t.node, t.devices, poolsIncomplete(t.slices))}
}

// An incomplete pool (checkSlices failed) may lack the slices holding
// placements: counter sets without them are then not judged.
func partitioningFinding(node string, n *corev1.Node, nd *inspect.NodeDevices, incomplete bool) Finding {
	f := Finding{Check: CheckPartitioning, Node: node}
	label, hasLabel := "", false
	if n != nil {
		label, hasLabel = n.Labels[PartitioningLabel]
	}
	pub := publishedPartitioning(nd)
	looked := pub.describe(label, hasLabel)
	empty := pub.empty
	switch {
	case incomplete:
		looked += "; the pool is incomplete: placements not judged"
		empty = nil
	case len(pub.setNames) > 0 && len(empty) == 0:
		looked += "; every counter set has placements"
	}
	switch {
	case len(empty) > 0:
		f.Status = StatusWarn
		f.Detail = fmt.Sprintf("counter set %s published without placement devices (%s)", strings.Join(empty, ","), looked)
		f.Fix = fmt.Sprintf("a dynamic GPU offers its placements on its counter set; check the agent's log on %s for those GPUs' MIG profiles, and that every slice of the pool is published", node)
	case hasLabel && label == names.PartitioningStatic && len(pub.setNames) > 0:
		f.Status = StatusWarn
		f.Detail = fmt.Sprintf("labelled static, but counter sets (dynamic partitioning) are published for %s (%s)", strings.Join(pub.setNames, ","), looked)
		f.Fix = "the node label and the agent's --partitioning (chart value partitioning) disagree: make them match"
	case hasLabel && label == names.PartitioningDynamic && len(pub.staticParts) > 0:
		f.Status = StatusWarn
		f.Detail = fmt.Sprintf("labelled dynamic, but %s publish static partitions (no counter set) (%s)", strings.Join(pub.staticParts, ","), looked)
		f.Fix = "the node label and the agent's --partitioning (chart value partitioning) disagree: make them match"
	default:
		f.Status = StatusPass
		f.Detail = looked
	}
	return f
}

// partitioning is how a node's GPUs are published.
type partitioning struct {
	// setNames are the counter sets (dynamic partitioning: one per GPU,
	// named like it), empty those no placement consumes; staticParts the
	// GPUs with partitions that consume no counter set. Each in device
	// name order.
	setNames, empty, staticParts []string
	// GPUs published whole only, as partitions only (MIG mode), as both,
	// and dynamic.
	gpus, whole, partsOnly, both, dynamic int
}

func publishedPartitioning(nd *inspect.NodeDevices) partitioning {
	var p partitioning
	placements := map[inspect.DeviceKey]int{}
	for k := range nd.CounterSets {
		placements[k] = 0
	}
	for _, d := range nd.Devices {
		if inspect.AttrString(d.Dev, publish.AttrType) != publish.TypePartition {
			continue
		}
		if len(d.Dev.ConsumesCounters) == 0 {
			if parent := inspect.PartitionParent(d.Dev.Name); !slices.Contains(p.staticParts, parent) {
				p.staticParts = append(p.staticParts, parent)
			}
			continue
		}
		for _, c := range d.Dev.ConsumesCounters {
			k := inspect.DeviceKey{Pool: d.Pool, Name: c.CounterSet}
			if _, ok := placements[k]; ok {
				placements[k]++
			}
		}
	}
	for k, n := range placements {
		p.setNames = append(p.setNames, k.Name)
		if n == 0 {
			p.empty = append(p.empty, k.Name)
		}
	}
	slices.SortFunc(p.setNames, inspect.CompareDeviceNames)
	slices.SortFunc(p.empty, inspect.CompareDeviceNames)
	slices.SortFunc(p.staticParts, inspect.CompareDeviceNames)
	p.countGPUs(nd, placements)
	return p
}

// countGPUs counts the node's GPUs by how they are published.
func (p *partitioning) countGPUs(nd *inspect.NodeDevices, sets map[inspect.DeviceKey]int) {
	groups := nd.GPUGroups()
	p.gpus = len(groups)
	for _, g := range groups {
		_, dynamic := sets[inspect.DeviceKey{Pool: g.Pool, Name: g.Name}]
		switch {
		case dynamic:
			p.dynamic++
		case g.Whole != nil && len(g.Partitions) > 0:
			p.both++
		case g.Whole != nil:
			p.whole++
		default:
			p.partsOnly++
		}
	}
}

// describe is what was looked at: "LABEL; N GPUs: 6 whole only, ...".
func (p *partitioning) describe(label string, hasLabel bool) string {
	lbl := "no " + PartitioningLabel + " label"
	if hasLabel {
		lbl = PartitioningLabel + "=" + label
	}
	var kinds []string
	for _, k := range []struct {
		n    int
		what string
	}{{p.whole, "whole only"}, {p.partsOnly, "partitions only (MIG mode)"}, {p.both, "whole and partitions"}, {p.dynamic, "dynamic (a counter set each)"}} {
		if k.n > 0 {
			kinds = append(kinds, fmt.Sprintf("%d %s", k.n, k.what))
		}
	}
	looked := fmt.Sprintf("%s; %d GPUs", lbl, p.gpus)
	if len(kinds) > 0 {
		looked += ": " + strings.Join(kinds, ", ")
	}
	return looked
}
