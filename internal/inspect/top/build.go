package top

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/tessera-gpu/tessera/internal/inspect"
	"github.com/tessera-gpu/tessera/internal/names"
)

// Pod is one device a pod holds, with the device's readings.
type Pod struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Node      string `json:"node"`
	Device    string `json:"device"`
	UUID      string `json:"uuid,omitempty"`
	Profile   string `json:"profile,omitempty"`
	// Claim is namespace/name of the ResourceClaim.
	Claim      string   `json:"claim"`
	ShareID    string   `json:"shareID,omitempty"`
	Containers []string `json:"containers,omitempty"`
	// Utilization is 0..1; nil where the device reports none (a MIG
	// device on NVML).
	Utilization *float64 `json:"utilization,omitempty"`
	MemoryUsed  *int64   `json:"memoryUsedBytes,omitempty"`
	// MemoryAllowed is what the pod may use: its share's memory (the
	// claim's consumed capacity) on a shared device, else the device's.
	MemoryAllowed *int64   `json:"memoryAllowedBytes,omitempty"`
	Temperature   *float64 `json:"temperatureCelsius,omitempty"`
	Power         *float64 `json:"powerWatts,omitempty"`
	// SharedWith is how many other pods use the device. When it is not 0
	// the readings are the whole device's: the hardware reports none per
	// pod, and they are not this pod's alone.
	SharedWith int `json:"sharedWith,omitempty"`
}

// Node is a node's GPUs summed: whole GPUs only, so that a GPU and its
// partitions are not counted twice.
type Node struct {
	Node string `json:"node"`
	GPUs int    `json:"gpus"`
	// InUse is the GPUs of which a pod holds the GPU or a partition.
	InUse int `json:"gpusInUse"`
	Pods  int `json:"pods"`
	// Utilization is the mean of the GPUs that report one.
	Utilization *float64 `json:"utilization,omitempty"`
	MemoryUsed  *int64   `json:"memoryUsedBytes,omitempty"`
	MemoryTotal *int64   `json:"memoryTotalBytes,omitempty"`
	Power       *float64 `json:"powerWatts,omitempty"`
	PowerLimit  *float64 `json:"powerLimitWatts,omitempty"`
	// Temperature is the hottest GPU's.
	Temperature *float64 `json:"maxTemperatureCelsius,omitempty"`
}

// Top is what the two commands print.
type Top struct {
	Pods  []Pod  `json:"pods"`
	Nodes []Node `json:"nodes"`
}

// Shares maps a share's allocation (ShareKey) to the memory its claim
// consumed on the device, from the ResourceClaims' status.
type Shares map[ShareKey]int64

// ShareKey names one allocation of a shared device.
type ShareKey struct{ ClaimNamespace, Claim, Node, Device, ShareID string }

type devKey struct{ node, device string }

// readings are one device's telemetry.
type readings struct {
	util, temp, power, powerLimit *float64
	used, total                   *int64
}

// Build joins the series: each pod's devices (from
// tessera_device_allocation_info) with their readings (tessera_gpu_*).
func Build(series []Series, shares Shares) *Top {
	tel := map[devKey]*readings{}
	type holding struct {
		Pod
		containers map[string]bool
	}
	type holdKey struct{ ns, pod, node, device, claim, share string }
	held := map[holdKey]*holding{}
	holders := map[devKey]map[string]bool{}
	for _, s := range series {
		k := devKey{s.Labels["node"], s.Labels["device"]}
		if k.device == "" {
			continue
		}
		if s.Name == metricAllocation {
			id := Pod{Namespace: s.Labels["namespace"], Pod: s.Labels["pod"], Node: k.node, Device: k.device,
				UUID: s.Labels["uuid"], Profile: s.Labels["profile"], ShareID: s.Labels["share_id"],
				Claim: s.Labels["claim_namespace"] + "/" + s.Labels["claim"]}
			if id.Pod == "" {
				continue
			}
			hk := holdKey{id.Namespace, id.Pod, id.Node, id.Device, id.Claim, id.ShareID}
			h := held[hk]
			if h == nil {
				h = &holding{Pod: id, containers: map[string]bool{}}
				held[hk] = h
			}
			if c := s.Labels["container"]; c != "" {
				h.containers[c] = true
			}
			if holders[k] == nil {
				holders[k] = map[string]bool{}
			}
			holders[k][id.Namespace+"/"+id.Pod] = true
			continue
		}
		r := tel[k]
		if r == nil {
			r = &readings{}
			tel[k] = r
		}
		v := s.Value
		switch s.Name {
		case metricUtilization:
			r.util = &v
		case metricTemperature:
			r.temp = &v
		case metricPower:
			r.power = &v
		case metricPowerLimit:
			r.powerLimit = &v
		case metricMemoryUsed:
			r.used = ptr(int64(v))
		case metricMemoryTotal:
			r.total = ptr(int64(v))
		}
	}
	t := &Top{Pods: []Pod{}, Nodes: []Node{}}
	for _, h := range held {
		p := h.Pod
		k := devKey{p.Node, p.Device}
		p.Containers = slices.Sorted(maps.Keys(h.containers))
		p.SharedWith = len(holders[k]) - 1
		if r := tel[k]; r != nil {
			p.Utilization, p.MemoryUsed, p.MemoryAllowed, p.Temperature, p.Power = r.util, r.used, r.total, r.temp, r.power
		}
		ns, claim, _ := strings.Cut(p.Claim, "/")
		if m, ok := shares[ShareKey{ns, claim, p.Node, p.Device, p.ShareID}]; ok {
			p.MemoryAllowed = ptr(m)
		}
		t.Pods = append(t.Pods, p)
	}
	slices.SortFunc(t.Pods, func(a, b Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Pod, b.Pod), cmp.Compare(a.Node, b.Node),
			inspect.CompareDeviceNames(a.Device, b.Device), cmp.Compare(a.Claim, b.Claim))
	})
	t.Nodes = buildNodes(tel, t.Pods)
	return t
}

func buildNodes(tel map[devKey]*readings, pods []Pod) []Node {
	nodes := map[string]*Node{}
	node := func(n string) *Node {
		if nodes[n] == nil {
			nodes[n] = &Node{Node: n}
		}
		return nodes[n]
	}
	utilSum, utilN := map[string]float64{}, map[string]int{}
	for k, r := range tel {
		if gpu, ok := names.ParentGPU(k.device); !ok || gpu != k.device {
			continue // a partition: its GPU's readings count
		}
		n := node(k.node)
		n.GPUs++
		if r.util != nil {
			utilSum[k.node] += *r.util
			utilN[k.node]++
		}
		n.MemoryUsed = add(n.MemoryUsed, r.used)
		n.MemoryTotal = add(n.MemoryTotal, r.total)
		n.Power = add(n.Power, r.power)
		n.PowerLimit = add(n.PowerLimit, r.powerLimit)
		if r.temp != nil && (n.Temperature == nil || *r.temp > *n.Temperature) {
			n.Temperature = ptr(*r.temp)
		}
	}
	inUse := map[devKey]bool{}
	podsOn := map[string]map[string]bool{}
	for _, p := range pods {
		gpu, ok := names.ParentGPU(p.Device)
		if !ok {
			gpu = p.Device
		}
		inUse[devKey{p.Node, gpu}] = true
		if podsOn[p.Node] == nil {
			podsOn[p.Node] = map[string]bool{}
		}
		podsOn[p.Node][p.Namespace+"/"+p.Pod] = true
	}
	for k := range inUse {
		node(k.node).InUse++
	}
	for n, ps := range podsOn {
		node(n).Pods = len(ps)
	}
	out := make([]Node, 0, len(nodes))
	for name, n := range nodes {
		if utilN[name] > 0 {
			n.Utilization = ptr(utilSum[name] / float64(utilN[name]))
		}
		out = append(out, *n)
	}
	slices.SortFunc(out, func(a, b Node) int { return cmp.Compare(a.Node, b.Node) })
	return out
}

func ptr[T any](v T) *T { return &v }

// add sums readings where v is known; nil stays nil until one is.
func add[N int64 | float64](sum, v *N) *N {
	if v == nil {
		return sum
	}
	if sum == nil {
		return ptr(*v)
	}
	return ptr(*sum + *v)
}
