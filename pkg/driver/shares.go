package driver

import (
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/pkg/names"
	"github.com/tessera-gpu/tessera/pkg/sharing"
)

// A capacity share says on its claim, next to its device, whether the
// hardware enforces it: `kubectl describe resourceclaim` then answers "is
// my 7Gi a limit or a promise?" without reading the docs.

const (
	// ConditionShareEnforced is the condition type on a share's device.
	ConditionShareEnforced = "ShareEnforced"
	// ReasonMPS: the share's limits are MPS client limits.
	ReasonMPS = "MPS"
	// ReasonSchedulingOnly: nothing on the node enforces the share.
	ReasonSchedulingOnly = "SchedulingOnly"
)

func shareCondition(sh *sharing.Share) (metav1.ConditionStatus, string, string) {
	if !sh.Enforced {
		return metav1.ConditionFalse, ReasonSchedulingOnly, fmt.Sprintf("share %s (%s) is the scheduler's accounting only: this GPU cannot enforce it, so a process may use more", sh.ID, sh)
	}
	msg := fmt.Sprintf("share %s (%s) runs under the device's MPS daemon: each process may pin at most %dMiB of device memory", sh.ID, sh, sh.MemoryBytes>>20)
	if sh.ComputeUnits == 0 {
		msg += " and has no cap on compute (a memory-only share)"
	} else {
		msg += " and use its share of the compute units (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE)"
	}
	return metav1.ConditionTrue, ReasonMPS, msg
}

// sharesRecorded reports whether the claim's status already says how each
// of its shares is enforced, so a repeated prepare writes nothing.
func (d *Driver) sharesRecorded(claim *resourceapi.ResourceClaim, shares map[deviceKey]*sharing.Share) bool {
	found := 0
	for _, ds := range claim.Status.Devices {
		if ds.Driver != names.DriverName {
			continue
		}
		k := deviceKey{ds.Pool, ds.Device, ""}
		if ds.ShareID != nil {
			k.shareID = *ds.ShareID
		}
		if shares[k] == nil {
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
