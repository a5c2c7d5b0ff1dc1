package doctor

import (
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/inspect"
)

// target is one node checked, and what its checks look at.
type target struct {
	name string
	// node is nil when the Node does not exist or could not be read
	// (Input.NodesErr says which).
	node    *corev1.Node
	slices  []resourceapi.ResourceSlice
	devices *inspect.NodeDevices
	// events are the node's recent failed-prepare pod events.
	events []corev1.Event
}

// A fleetCheck judges the cluster as a whole, a nodeCheck one node. Each
// returns no finding where it does not apply.
type (
	fleetCheck func(in *Input, targets []*target) []Finding
	nodeCheck  func(in *Input, t *target) []Finding
)

// The checks, in the order their findings print: the fleet's, then each
// node's in turn.
var (
	fleetChecks = []fleetCheck{checkDeviceClasses, checkAnySlices, checkDriver}
	nodeChecks  = []nodeCheck{checkNode, checkSlices, checkReadyz, checkHealth, checkPrepare, checkPartitioning, checkIMEX}
)

// Run runs every check: the fleet-wide ones once, then each node's, then
// the failed-prepare events no node could be found for.
func Run(in *Input) []Finding {
	targets, unplaced := in.targets()
	var out []Finding
	for _, c := range fleetChecks {
		out = append(out, c(in, targets)...)
	}
	for _, t := range targets {
		for _, c := range nodeChecks {
			out = append(out, c(in, t)...)
		}
	}
	return append(out, checkUnplacedEvents(unplaced)...)
}

// targets are the nodes to check with what their checks need, and the
// recent failed-prepare events of no known node.
func (in *Input) targets() ([]*target, []corev1.Event) {
	bySlice := in.driverSlices()
	nodes := map[string]*corev1.Node{}
	for i := range in.NodeObjects {
		nodes[in.NodeObjects[i].Name] = &in.NodeObjects[i]
	}
	events, unplaced := in.prepareEvents()
	var out []*target
	for _, name := range in.TargetNodes() {
		sl := bySlice[name]
		out = append(out, &target{name: name, node: nodes[name], slices: sl, devices: nodeDevicesOf(name, sl), events: events[name]})
	}
	return out, unplaced
}
