package sharing

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/tessera-gpu/tessera/api/gpu/v1alpha1"
	"github.com/tessera-gpu/tessera/internal/gpuvendor/vendors"
)

// Share is the part of a multi-allocatable device (agent flag
// --sharing=capacity) that one claim got: the allocation's ShareID and the
// capacity it consumed. A claim that consumed the device's whole memory is
// not a share: it has the device to itself, as with --sharing=none.
type Share struct {
	ID           string `json:"id"`
	MemoryBytes  int64  `json:"memoryBytes"`
	ComputeUnits int64  `json:"computeUnits,omitempty"`
	// Enforced is true where the device enforces the share's limits (the
	// NVIDIA device's MPS daemon, shared by its shares); false where they
	// are the scheduler's accounting only (AMD).
	Enforced bool `json:"enforced,omitempty"`
}

// String is the share's consumption for logs and errors: "7Gi, 29 compute units".
func (s *Share) String() string {
	out := resource.NewQuantity(s.MemoryBytes, resource.BinarySI).String()
	if s.ComputeUnits > 0 {
		out += fmt.Sprintf(", %d compute units", s.ComputeUnits)
	}
	return out
}

// IsShare reports whether the device is a capacity share.
func (s *Settings) IsShare() bool { return s != nil && s.Share != nil }

// SharedDaemon reports whether the device runs under its device's shared
// MPS daemon (an enforced share) rather than a daemon of its own claim.
func (s *Settings) SharedDaemon() bool { return s.IsMPS() && s.IsShare() && s.Share.Enforced }

// ClaimDaemon reports whether the device runs under its claim's own MPS
// daemon (an MPS config on a device the claim has to itself).
func (s *Settings) ClaimDaemon() bool { return s.IsMPS() && !s.IsShare() }

// shareSettings is how a share is run: where the vendor enforces shares
// (NVIDIA), under the device's shared MPS daemon, each client limited by
// the share's memory (pinned device memory) and compute (active thread
// percentage of the device's compute units; none for a memory-only share);
// elsewhere not at all.
func shareSettings(d Device) *Settings {
	sh := *d.Share
	if !vendors.Capabilities(d.Vendor).EnforcedShares {
		sh.Enforced = false
		return &Settings{Share: &sh}
	}
	sh.Enforced = true
	s := &Settings{Strategy: v1alpha1.MPS, MPSPinnedMemoryLimit: sh.MemoryBytes, Share: &sh}
	if sh.ComputeUnits > 0 && d.ComputeUnits > 0 {
		// Rounded up: a share of 29 of 58 SMs gets 50%, one of 1 SM at least 1%.
		s.MPSActiveThreadPercentage = int32(min(100, (sh.ComputeUnits*100+d.ComputeUnits-1)/d.ComputeUnits))
	}
	return s
}
