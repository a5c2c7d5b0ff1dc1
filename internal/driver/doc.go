// Package driver is the node agent: it publishes the node's devices through
// kubeletplugin.Helper and serves the kubelet's prepare, unprepare and health
// calls, delegating to internal/publish, internal/claims and the backend.
package driver
