// Package amd is AMD's gpuvendor.Vendor: a DRM card and render node per
// GPU, and per compute partition (XCP) its own pair, /dev/kfd once per
// container, no environment; time-slicing at the fixed interval only, no
// MPS, capacity shares as accounting.
package amd
