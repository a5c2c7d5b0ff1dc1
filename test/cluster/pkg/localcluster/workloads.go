package localcluster

import (
	"sort"
	"strings"
)

// WorkloadGates are the Kubernetes 1.37 feature gates behind gang
// scheduling with DRA: GenericWorkload (the PodGroup API and the
// scheduler's GangScheduling plugin, beta), DRAWorkloadResourceClaims
// (claims owned by and reserved for a PodGroup, beta) and
// TopologyAwareWorkloadScheduling (a group's pods kept in one node-label
// domain, alpha). All are off by default.
var WorkloadGates = []string{"GenericWorkload", "DRAWorkloadResourceClaims", "TopologyAwareWorkloadScheduling"}

// WorkloadAPI is the API group version that serves PodGroups and
// Workloads; a beta API is off by default, so the API server needs it in
// --runtime-config as well as the gate.
const WorkloadAPI = "scheduling.k8s.io/v1beta1"

// DRAGates are the feature gates every control-plane component gets,
// whatever the config: DRAAdminAccess, without which the API server drops
// a request's adminAccess and the scheduler allocates no device another
// claim holds, so a monitor's claim (docs/claims.md, admin access) would
// wait for devices forever. On by default in the releases the cluster
// runs; named so that a binary with another default still serves it.
var DRAGates = []string{"DRAAdminAccess"}

// gateFlag is --feature-gates turning DRAGates on, and WorkloadGates when
// c.Workloads is on.
func (c *Config) gateFlag() string {
	gates := append([]string(nil), DRAGates...)
	if c.Workloads {
		gates = append(gates, WorkloadGates...)
	}
	on := make([]string, len(gates))
	for i, g := range gates {
		on[i] = g + "=true"
	}
	return "--feature-gates=" + strings.Join(on, ",")
}

// gateArgs are the flags a control-plane component gets for its feature
// gates: the gates, and for the API server with Workloads on the
// Workload API too.
func (c *Config) gateArgs(apiServer bool) []string {
	if apiServer && c.Workloads {
		return []string{c.gateFlag(), "--runtime-config=" + WorkloadAPI + "=true"}
	}
	return []string{c.gateFlag()}
}

// kubeletGates is the KubeletConfiguration featureGates stanza: the
// kubelet admits a pod to a claim reserved for its PodGroup only with
// DRAWorkloadResourceClaims on.
func (c *Config) kubeletGates() string {
	if !c.Workloads {
		return ""
	}
	gates := append([]string(nil), WorkloadGates...)
	sort.Strings(gates)
	var b strings.Builder
	b.WriteString("featureGates:\n")
	for _, g := range gates {
		b.WriteString("  " + g + ": true\n")
	}
	return b.String()
}
