// Package top is `kubectl tessera top pods|nodes`: each GPU pod's and
// node's live numbers (utilization, memory used of what it may use,
// temperature, power), read from the agents' own metrics
// (docs/metrics.md: the tessera_gpu_* telemetry joined with
// tessera_device_allocation_info), or from a Prometheus that scrapes them.
//
//   - series.go: the metrics as plain series, from an agent's /metrics
//     text or a Prometheus instant query.
//   - gather.go: asking every agent (through the API server's pod proxy,
//     or at --metrics-url) or Prometheus, and reading the claims' shares.
//   - build.go: joining telemetry with who holds each device.
//   - print.go: the tables, -o wide, json and yaml.
package top
