// Package auth guards the agent's /metrics the way Kubernetes components
// guard theirs (kube-scheduler, kube-controller-manager, the kubelet): the
// caller's bearer token is authenticated with a TokenReview and the user it
// names is authorized with a SubjectAccessReview for the non-resource URL
// /metrics, verb get. Answers are cached so that a scrape every few seconds
// costs the API server a review every few minutes.
//
// It is built on client-go's typed TokenReview and SubjectAccessReview
// clients rather than k8s.io/apiserver's delegating authenticator and
// authorizer: those would pull OpenTelemetry exporters, grpc-gateway and the
// konnectivity client into the agent for two API calls and a cache.
//
// The serving certificate is tls.go's: one the operator gives, reloaded
// when its files change, or one generated, self-signed, at each start.
package auth
