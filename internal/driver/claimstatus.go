package driver

import (
	"context"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metaapply "k8s.io/client-go/applyconfigurations/meta/v1"
	resourceapply "k8s.io/client-go/applyconfigurations/resource/v1"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/claims"
	"github.com/tessera-gpu/tessera/internal/names"
)

// Pod events alone would show a failed prepare only as a repeat at each
// retry, while the claim stays allocated and holds its GPU. The agent also
// writes it where users look: a condition on the claim's devices in its
// status (KEP-4817, status.devices[].conditions), which `kubectl describe
// resourceclaim` shows. The write is server-side apply under the driver's
// own field manager, so it touches only this driver's entries; it happens
// on a failure and on the first success after one, never on the common path.

const (
	// ReasonPrepared clears an earlier failure.
	ReasonPrepared = "Prepared"
	// maxConditionMessage is the API's limit on a condition message.
	maxConditionMessage = 32768
	statusTimeout       = 5 * time.Second
)

// reportPrepare records the outcome of preparing claim in its device status
// when there is something to say: the failure, a success after a recorded
// failure, and how each capacity share is enforced (shares.go). Errors are
// logged: the kubelet's event says the same, and a status the agent may not
// write must not fail the claim.
func (d *Driver) reportPrepare(ctx context.Context, claim *resourceapi.ResourceClaim, devs []claims.Device, prepErr error) {
	if d.opts.KubeClient == nil || claim.Status.Allocation == nil {
		return
	}
	prepared := prepErr != nil || d.failureRecorded(claim)
	// A share's isolation is the one its prepare assessed; a prepare that
	// found the claim prepared already has none to report, and its first
	// prepare reported it.
	shares := map[deviceKey]claims.Device{}
	if prepErr == nil {
		for _, dv := range devs {
			if dv.Share != nil && dv.Isolation != nil {
				shares[deviceKey{dv.Pool, dv.Name, dv.ShareID}] = dv
			}
		}
	}
	if !prepared && (len(shares) == 0 || d.sharesRecorded(claim, shares)) {
		return
	}
	status, reason, msg := metav1.ConditionTrue, ReasonPrepared, ""
	if prepErr != nil {
		status, reason, msg = metav1.ConditionFalse, conditionReason(errorReason(prepErr)), prepErr.Error()
		if len(msg) > maxConditionMessage {
			msg = msg[:maxConditionMessage]
		}
	}
	now := metav1.Now()
	st := resourceapply.ResourceClaimStatus()
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != names.DriverName {
			continue
		}
		var conds []*metaapply.ConditionApplyConfiguration
		if prepared {
			conds = append(conds, metaapply.Condition().WithType(names.ConditionPrepared).WithStatus(status).WithReason(reason).
				WithMessage(msg).WithLastTransitionTime(now).WithObservedGeneration(claim.Generation))
		}
		shareID := ""
		if r.ShareID != nil {
			shareID = string(*r.ShareID)
		}
		if dv, ok := shares[deviceKey{r.Pool, r.Device, shareID}]; ok {
			s, rs, m := shareCondition(dv.Share, *dv.Isolation)
			conds = append(conds, metaapply.Condition().WithType(ConditionShareEnforced).WithStatus(s).WithReason(rs).
				WithMessage(m).WithLastTransitionTime(now).WithObservedGeneration(claim.Generation))
		}
		if len(conds) == 0 {
			continue
		}
		dev := resourceapply.AllocatedDeviceStatus().WithDriver(r.Driver).WithPool(r.Pool).WithDevice(r.Device).WithConditions(conds...)
		if shareID != "" {
			dev = dev.WithShareID(shareID)
		}
		st = st.WithDevices(dev)
	}
	apply := resourceapply.ResourceClaim(claim.Name, claim.Namespace).WithStatus(st)
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	if _, err := d.opts.KubeClient.ResourceV1().ResourceClaims(claim.Namespace).ApplyStatus(ctx, apply, metav1.ApplyOptions{FieldManager: names.DriverName, Force: true}); err != nil {
		klog.FromContext(ctx).Error(err, "Record the prepare outcome in the claim's device status", "claim", klog.KObj(claim), "prepared", prepErr == nil)
	}
}

// deviceKey names a device entry of a claim's status.
type deviceKey struct{ pool, device, shareID string }

// failureRecorded reports whether the claim's status holds a failed
// Prepared condition of this driver.
func (d *Driver) failureRecorded(claim *resourceapi.ResourceClaim) bool {
	for _, ds := range claim.Status.Devices {
		if ds.Driver != names.DriverName {
			continue
		}
		for _, c := range ds.Conditions {
			if c.Type == names.ConditionPrepared && c.Status == metav1.ConditionFalse {
				return true
			}
		}
	}
	return false
}

// conditionReason turns a metrics reason ("config_rejected") into a
// condition reason ("ConfigRejected"), which must be CamelCase.
func conditionReason(r string) string {
	var b strings.Builder
	for _, part := range strings.Split(r, "_") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	if b.Len() == 0 {
		return "PrepareFailed"
	}
	return b.String()
}
