// Package nvidia is NVIDIA's gpuvendor.Vendor: /dev/nvidia<minor> per GPU,
// MIG instances reached through the parent's node plus two capability
// nodes, nvidiactl and the unified-memory nodes once per container, the
// claim's GPUs and instances named in NVIDIA_VISIBLE_DEVICES; time-slice
// intervals, MPS and enforced capacity shares.
package nvidia
