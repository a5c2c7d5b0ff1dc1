package isolation

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tessera-gpu/tessera/internal/gpuvendor"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/memlimit"
)

// Assessment is how a share of one GPU or partition is held on this node,
// and why not more strongly.
type Assessment struct {
	Level Level
	// Blockers are the missing prerequisites of kernel isolation, each a
	// sentence for the claim's status and the logs; empty at Kernel.
	Blockers []string
	// MPSNamespace is true where each share runs in an MPS v3 namespace of
	// its own (MPSNamespaces), false where every share of the device
	// reaches the one daemon's control pipe (legacy MPS) or none runs.
	MPSNamespace bool
	// Mechanism and Region say, at Kernel, how the limit is set (internal/memlimit)
	// and on which dmem region.
	Mechanism memlimit.Mechanism
	Region    string
}

// Assess judges a share of gpu (or of its partition p, nil for the whole
// GPU) on host, by the vendor's capabilities.
func Assess(caps gpuvendor.Capabilities, gpu *inventory.GPU, p *inventory.Partition, host Host) Assessment {
	var blockers []string
	switch {
	case !host.CgroupV2:
		blockers = append(blockers, fmt.Sprintf("the node has no cgroup v2 hierarchy at %s", host.Root))
	case !host.Dmem:
		blockers = append(blockers, "the node's kernel offers no dmem cgroup controller (Linux 6.14+, CONFIG_CGROUP_DMEM)")
	}
	switch {
	case caps.DmemRegion == "":
		blockers = append(blockers, "the vendor's driver registers no device memory region with the kernel")
	case p != nil && !caps.KernelMemoryPartitions:
		blockers = append(blockers, fmt.Sprintf("a %s partition's memory cannot be limited per cgroup", p.Kind))
	case caps.KernelMemoryDriver != "" && olderThan(gpu.DriverVersion, caps.KernelMemoryDriver):
		blockers = append(blockers, fmt.Sprintf("driver %s is older than %s, the first to enforce a cgroup's device memory limit", orUnknown(gpu.DriverVersion), caps.KernelMemoryDriver))
	case host.Dmem:
		if region := fmt.Sprintf(caps.DmemRegion, gpu.PCIBusID); !hasRegion(host, region) {
			blockers = append(blockers, fmt.Sprintf("dmem.capacity lists no region %s for this GPU", region))
		}
	}
	mechanism := memlimit.Mechanism(caps.KernelLimit)
	if host.Hook.Simulated {
		// The simulator's tree plays the kernel, whatever the vendor's call.
		mechanism = memlimit.Dmem
	}
	switch {
	case host.Hook.Path == "":
		blockers = append(blockers, "the agent runs without a memory limit hook (--memory-limit-hook is empty)")
	case !host.HookInstalled:
		blockers = append(blockers, fmt.Sprintf("no memory limit hook is installed at %s (the chart's memoryLimits.hookDir)", host.Hook.Path))
	case mechanism == "":
		blockers = append(blockers, "Tessera knows no way to set the vendor's cgroup memory limit")
	}
	a := Assessment{Level: Kernel, Blockers: blockers, MPSNamespace: caps.EnforcedShares && MPSNamespaces(caps, gpu)}
	if len(blockers) > 0 {
		a.Level = None
		if caps.EnforcedShares {
			a.Level = Process
		}
		return a
	}
	a.Mechanism, a.Region = mechanism, fmt.Sprintf(caps.DmemRegion, gpu.PCIBusID)
	return a
}

// MPSNamespaces reports whether gpu's driver runs MPS v3, so that each
// share or MPS claim gets a namespace of its own (the backends start their
// daemons with protocol 3 by the same test).
func MPSNamespaces(caps gpuvendor.Capabilities, gpu *inventory.GPU) bool {
	return caps.MPS && caps.MPSNamespacesDriver != "" && !olderThan(gpu.DriverVersion, caps.MPSNamespacesDriver)
}

// RegistersRegion reports whether the vendor's driver of gpu registers the
// GPU's memory with the dmem controller (where the kernel has it).
func RegistersRegion(caps gpuvendor.Capabilities, gpu *inventory.GPU) bool {
	return caps.DmemRegion != "" && (caps.KernelMemoryDriver == "" || !olderThan(gpu.DriverVersion, caps.KernelMemoryDriver))
}

func hasRegion(h Host, name string) bool {
	_, ok := h.Regions[name]
	return ok
}

// olderThan compares dotted numeric versions (580.65.6); an unknown or
// unparsable version counts as older.
func olderThan(v, min string) bool {
	a, ok := parts(v)
	b, _ := parts(min)
	if !ok {
		return true
	}
	for i := range 3 {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

func parts(v string) ([3]int, bool) {
	var out [3]int
	f := strings.Split(v, ".")
	if v == "" || len(f) > 3 {
		return out, false
	}
	for i, s := range f {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return out, false
		}
		out[i] = n
	}
	return out, true
}

func orUnknown(v string) string {
	if v == "" {
		return "(unknown version)"
	}
	return v
}
