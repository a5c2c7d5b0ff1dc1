package driver

import (
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/claims"
	"github.com/tessera-gpu/tessera/internal/isolation"
	"github.com/tessera-gpu/tessera/internal/memlimit"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sharing"
)

// A capacity share says on its claim, next to its device, how it is held
// (internal/isolation): `kubectl describe resourceclaim` then answers "is my 7Gi
// a limit or a promise?" without reading the docs. True only for a limit
// the tenant cannot lift; MPS client limits are the tenant's own
// processes' to keep, so they are False, and say so.

const (
	// ConditionShareEnforced is the condition type on a share's device.
	ConditionShareEnforced = "ShareEnforced"
	// ReasonKernelMemoryLimit: a cgroup limit on the workload holds the
	// share's memory.
	ReasonKernelMemoryLimit = "KernelMemoryLimit"
	// ReasonMPSNamespace: the share runs in an MPS v3 namespace of its own,
	// whose server holds its limits; not the kernel.
	ReasonMPSNamespace = "MPSNamespace"
	// ReasonProcessLimitsOnly: the share's limits are MPS client limits,
	// which the workload's own processes apply.
	ReasonProcessLimitsOnly = "ProcessLimitsOnly"
	// ReasonSchedulingOnly: nothing on the node enforces the share.
	ReasonSchedulingOnly = "SchedulingOnly"
)

func shareCondition(sh *sharing.Share, a isolation.Assessment) (metav1.ConditionStatus, string, string) {
	why := ""
	if len(a.Blockers) > 0 {
		why = " Not held by the kernel: " + strings.Join(a.Blockers, "; ") + "."
	}
	switch a.Level {
	case isolation.Kernel:
		limit, _ := memlimit.Bytes(sh.MemoryBytes)
		msg := fmt.Sprintf("share %s (%s): its container's cgroup may hold at most %dMiB of %s, a hard limit Tessera's CDI hook sets through %s before the container starts (a container it cannot limit does not start); one container holds the share at a time", sh.ID, sh, limit>>20, a.Region, mechanismName(a.Mechanism))
		if a.MPSNamespace {
			msg += "; its compute runs in an MPS v3 namespace of its own, whose socket alone its containers see"
		}
		return metav1.ConditionTrue, ReasonKernelMemoryLimit, msg + "."
	case isolation.Process:
		if a.MPSNamespace {
			msg := fmt.Sprintf("share %s (%s) runs in an MPS v3 namespace of its own in the GPU's MPS daemon, whose server caps the namespace's clients at %dMiB of pinned device memory", sh.ID, sh, sh.MemoryBytes>>20)
			if sh.ComputeUnits > 0 {
				msg += " and its share of the compute units"
			}
			msg += "; its containers see only that namespace's socket, not the daemon's control pipe nor other shares' namespaces. Not a kernel limit: a process that does not use MPS is not held by it."
			return metav1.ConditionFalse, ReasonMPSNamespace, msg + why
		}
		msg := fmt.Sprintf("share %s (%s) runs under the GPU's MPS daemon, whose clients are asked to pin at most %dMiB of device memory", sh.ID, sh, sh.MemoryBytes>>20)
		if sh.ComputeUnits > 0 {
			msg += " and to use their share of the compute units"
		}
		msg += " by CUDA_MPS_* variables in the container's environment: not an isolation boundary. A process that unsets them uses the whole GPU, and the daemon (its control pipe too) is shared with this GPU's other shares, whatever their namespace: the driver has legacy MPS only (MPS v3 namespaces need r615)."
		return metav1.ConditionFalse, ReasonProcessLimitsOnly, msg + why
	}
	return metav1.ConditionFalse, ReasonSchedulingOnly, fmt.Sprintf("share %s (%s) is the scheduler's accounting only: nothing on this GPU enforces it, so a process may use more.", sh.ID, sh) + why
}

func mechanismName(m memlimit.Mechanism) string {
	if m == memlimit.NVML {
		return "NVML (nvmlDeviceSetMemoryLimits_v1)"
	}
	return "the dmem cgroup controller (dmem.max)"
}

// sharesRecorded reports whether the claim's status already says how each
// of its shares is enforced, so a repeated prepare writes nothing.
func (d *Driver) sharesRecorded(claim *resourceapi.ResourceClaim, shares map[deviceKey]claims.Device) bool {
	found := 0
	for _, ds := range claim.Status.Devices {
		if ds.Driver != names.DriverName {
			continue
		}
		k := deviceKey{ds.Pool, ds.Device, ""}
		if ds.ShareID != nil {
			k.shareID = *ds.ShareID
		}
		if _, ok := shares[k]; !ok {
			continue
		}
		for _, c := range ds.Conditions {
			if c.Type == ConditionShareEnforced {
				found++
				break
			}
		}
	}
	return found == len(shares)
}

// logUnshared says which devices --sharing=capacity publishes whole, and
// why (publish.Entry.Unshared): otherwise an operator sees only that they
// publish no shares. It runs after every build and speaks only when that
// set changed, so each device is said once, not at every republish.
func (d *Driver) logUnshared(logger klog.Logger, res *publish.Result) {
	if d.opts.Sharing != publish.SharingCapacity {
		return
	}
	var set []string
	for _, name := range res.Order {
		if why := res.Devices[name].Unshared; why != "" {
			set = append(set, name+"="+string(why))
		}
	}
	key := strings.Join(set, ",")
	if key == d.unshared {
		return
	}
	d.unshared = key
	for _, name := range res.Order {
		e := res.Devices[name]
		switch e.Unshared {
		case publish.UnsharedIsolation:
			a := d.opts.isolation(e.GPU, e.Partition)
			logger.Info("Publishing a device whole: its shares would be held less strongly than --min-share-isolation",
				"device", name, "memoryIsolation", a.Level, "minShareIsolation", d.opts.MinShareIsolation, "notKernelBecause", a.Blockers)
		case publish.UnsharedLegacyMPS:
			logger.Info("Publishing a device whole: its shares would run under legacy MPS and reach the daemon's control pipe (--legacy-mps-shares=whole)", "device", name)
		case publish.UnsharedMemoryUnknown:
			logger.Info("Publishing a device whole: the backend could not read its memory, so there is nothing to count shares in (the backend's log and tessera_gpu_values_unknown say why)",
				"device", name, "gpu", e.GPU.UUID)
		}
	}
}
