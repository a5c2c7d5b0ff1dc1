// Package nvmllimit sets a share's memory limit on a cgroup through NVML
// (nvmlDeviceSetMemoryLimits_v1, NVIDIA r615+ MPS memory partitioning): the
// memlimit.NVML mechanism. Apart from package memlimit so that only the hook
// binary and the agent, which link go-nvml anyway, reach the NVIDIA library;
// go-nvml needs cgo, so New returns nil in other builds.
package nvmllimit
