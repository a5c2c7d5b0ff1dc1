// Package podresources reads which pod and container holds which of this
// driver's devices from the kubelet's PodResources API (v1, List) on the
// node's local socket, and keeps the last answer for the metrics.
//
// GPU exporters attribute a GPU to a pod through the same API, but only for
// their own DRA driver names, so on a Tessera node they lose every pod
// label; tessera_device_allocation_info (docs/metrics.md, "Which pod holds
// a GPU") puts them back. The agent polls on its own interval, never on the
// scrape path, and never asks the API server.
package podresources
