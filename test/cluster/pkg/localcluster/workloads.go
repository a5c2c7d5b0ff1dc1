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

// workloadGateFlag is --feature-gates turning WorkloadGates on, or ""
// when c.Workloads is off.
func (c *Config) workloadGateFlag() string {
	if !c.Workloads {
		return ""
	}
	on := make([]string, len(WorkloadGates))
	for i, g := range WorkloadGates {
		on[i] = g + "=true"
	}
	return "--feature-gates=" + strings.Join(on, ",")
}

// workloadArgs are the flags a control-plane component needs for
// Workloads: the gates, and for the API server the API too.
func (c *Config) workloadArgs(apiServer bool) []string {
	f := c.workloadGateFlag()
	if f == "" {
		return nil
	}
	if apiServer {
		return []string{f, "--runtime-config=" + WorkloadAPI + "=true"}
	}
	return []string{f}
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
