// Package nvmllimit sets a share's memory limit on a cgroup through NVML
// (nvmlDeviceSetMemoryLimits_v1, NVIDIA r615+ MPS memory partitioning): the
// memlimit.NVML mechanism. Apart from package memlimit so that only the hook
// binary links the NVIDIA library; go-nvml needs cgo, so the Setter exists
// only in cgo builds on linux (cmd/tessera-cdi-hook picks it by build tag).
package nvmllimit
