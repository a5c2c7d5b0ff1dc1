// Package webhook is Tessera's validating admission webhook: it judges the
// opaque gpu.tessera.dev configuration of ResourceClaims,
// ResourceClaimTemplates and DeviceClasses when they are written, with the
// same decoder the node agent uses at prepare (v1alpha1.Decode), so a bad
// configuration is refused at `kubectl apply` rather than when a pod that
// uses it starts.
//
// The chart registers it with failurePolicy Fail but with matchConditions
// that send only objects carrying a gpu.tessera.dev opaque config, so the
// webhook being down blocks nothing else. It needs no API access: it only
// answers AdmissionReviews, over TLS with a certificate it re-reads when a
// rotation replaces the mounted files.
package webhook
