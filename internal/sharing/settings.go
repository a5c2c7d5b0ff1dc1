package sharing

import (
	"github.com/tessera-gpu/tessera/api/gpu/v1alpha1"
	"github.com/tessera-gpu/tessera/internal/backend"
)

// Settings is how one allocated device is shared. The zero value (no
// config) is the GPU's native behaviour: time-slicing at whatever interval
// the GPU has, nothing applied.
type Settings struct {
	Strategy v1alpha1.SharingStrategy `json:"strategy"`
	// TimeSlice is the interval the claim sets on a whole GPU; empty for a
	// partition and for MPS. Default is recorded too: it is still a claim
	// on the GPU's interval, which another claim asking Long must not change.
	TimeSlice v1alpha1.TimeSliceInterval `json:"timeSlice,omitempty"`
	// MPS settings of this device (Strategy MPS).
	MPSActiveThreadPercentage int32 `json:"mpsActiveThreadPercentage,omitempty"`
	MPSPinnedMemoryLimit      int64 `json:"mpsPinnedMemoryLimit,omitempty"`
	// Share is set when the device is a capacity share (share.go); its
	// MPS settings above then come from the consumed capacity.
	Share *Share `json:"share,omitempty"`
}

// IsMPS reports whether the device runs under the claim's MPS daemon.
func (s *Settings) IsMPS() bool { return s != nil && s.Strategy == v1alpha1.MPS }

// Interval is the time-slice interval the device's claim holds on its GPU,
// and whether it holds one at all.
func (s *Settings) Interval() (backend.TimeSlice, bool) {
	if s == nil || s.Strategy != v1alpha1.TimeSlicing || s.TimeSlice == "" {
		return backend.TimeSliceDefault, false
	}
	return TimeSliceOf(s.TimeSlice), true
}

// TimeSliceOf maps the API's interval to the backend's.
func TimeSliceOf(i v1alpha1.TimeSliceInterval) backend.TimeSlice {
	switch i {
	case v1alpha1.ShortTimeSlice:
		return backend.TimeSliceShort
	case v1alpha1.MediumTimeSlice:
		return backend.TimeSliceMedium
	case v1alpha1.LongTimeSlice:
		return backend.TimeSliceLong
	}
	return backend.TimeSliceDefault
}

// HasEffects reports whether applying s changes the node: an interval to
// set or an MPS daemon to run. A share only the scheduler accounts for
// does not.
func (s *Settings) HasEffects() bool {
	_, interval := s.Interval()
	return interval || s.IsMPS()
}
