package names

import (
	"fmt"
	"strconv"
	"strings"
)

// Device names. A whole GPU is gpu-<n>, n its position in PCI bus ID order
// on the node; a partition is gpu-<n>-<kind>-<profile>-<first slice>, its
// profile lower case with '.', '+' and '_' as '-' (gpu-7-mig-3g-40gb-4).
// A user's config names devices this way (per-device MPS limits), so the
// form is part of the API.

const gpuPrefix = "gpu-"

// GPU is the device name of the GPU at position n in PCI bus ID order.
func GPU(n int) string { return gpuPrefix + strconv.Itoa(n) }

var profileReplacer = strings.NewReplacer(".", "-", "+", "-", "_", "-")

// Partition is the device name of the partition of kind (mig, xcp) and
// profile that starts at memory slice start on the GPU named parent.
func Partition(parent, kind, profile string, start int) string {
	return fmt.Sprintf("%s-%s-%s-%d", parent, kind, profileReplacer.Replace(strings.ToLower(profile)), start)
}

// ParentGPU is the GPU a device name belongs to: the name itself for a
// GPU, the GPU it starts with for a partition; ok is false for a name that
// is neither.
func ParentGPU(name string) (gpu string, ok bool) {
	if !strings.HasPrefix(name, gpuPrefix) {
		return "", false
	}
	rest := name[len(gpuPrefix):]
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	if n == 0 || (n < len(rest) && rest[n] != '-') {
		return "", false
	}
	return name[:len(gpuPrefix)+n], true
}
