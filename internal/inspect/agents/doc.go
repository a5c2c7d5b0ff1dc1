// Package agents finds the Tessera agent of a node and asks its HTTP port
// (/metrics, /readyz): at a URL the user gives (--metrics-url, the local
// cluster's host-process agents), or through the API server's proxy to the
// chart's agent pod. `kubectl tessera doctor` asks /readyz this way and
// `kubectl tessera top` /metrics; both only read.
package agents
