// Package metrics is the node agent's Prometheus instrumentation: the
// metrics it exports, a registry of its own, and the /metrics, /healthz
// and /readyz handler and listener (HTTPS, with plain HTTP beside it for the
// probes only; who may read /metrics is internal/metrics/auth's).
//
// The registry is not the client library's global one so that only what is
// listed here is exported (libraries that register on the default registry
// cannot add series behind the agent's back) and so that each test, or each
// agent in one process, gets a clean set.
//
// Every recording method is safe on a nil *Metrics and then does nothing:
// callers hold an optional *Metrics and never check it.
package metrics
