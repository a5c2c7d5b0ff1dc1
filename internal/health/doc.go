// Package health turns the raw signals backends report (XIDs, ECC and RAS
// counters, pending row remaps, a lost GPU; backend.HealthEvent) into what
// Kubernetes acts on: device taints in the node's ResourceSlices, which the
// scheduler respects and kube-controller-manager's device-taint eviction
// enforces (NoExecute), and the health the kubelet shows in pod status
// (KEP-4680).
//
// The rules, in one place and deliberately simple:
//
//   - A signal raises a condition on its GPU; each condition is one taint
//     under gpu.tessera.dev/ with the code in the value, and is published on
//     the GPU and every partition of it.
//   - XIDs are classified by a table (Policy.XID, overridable by a flag):
//     application-caused XIDs are ignored, hardware failures taint
//     NoExecute, errors that need a reset NoSchedule, the rest None
//     (visible, no effect).
//   - Degradation before failure: corrected errors (ECC single-bit, AMD RAS
//     correctable) rising by Policy.CorrectedThreshold or more within
//     Policy.Window taint NoSchedule "degrading": running work stays, new
//     work goes elsewhere.
//   - Conditions clear when their cause does: every one when the GPU comes
//     back reset (HealthRecovered, a counter dropping back, --clear in the
//     simulator); a pending remap or page retirement when it is no longer
//     pending; degradation, XIDs of effect None or NoSchedule when nothing
//     new arrived for Policy.Window. Hard failures (a lost GPU, uncorrected
//     errors, NoExecute XIDs) wait for the reset.
//   - The kubelet is told Unhealthy for a GPU with a NoExecute or NoSchedule
//     condition other than degradation, with the conditions as the message.
package health
