package v1alpha1

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Kinds of this group.
const (
	GpuConfigKind       = "GpuConfig"
	PartitionConfigKind = "PartitionConfig"
)

// TypeMeta is apiVersion and kind, as every Kubernetes object has them.
type TypeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// GpuConfig configures whole GPUs (devices with type "gpu").
type GpuConfig struct {
	TypeMeta `json:",inline"`
	// Sharing says how the containers and pods that use the claim share
	// the GPU. Empty: the default, time-slicing at the GPU's default
	// interval.
	Sharing *Sharing `json:"sharing,omitempty"`
	// Topology asks for files that tell collective libraries (NCCL, RCCL)
	// how the claim's GPUs are connected. Empty: none.
	Topology *TopologyConfig `json:"topology,omitempty"`
}

// TopologyConfig selects the topology files a claim's containers get
// (docs/training.md).
type TopologyConfig struct {
	// NCCLTopoFile mounts an NCCL topology file (the XML NCCL and RCCL
	// read from NCCL_TOPO_FILE) describing exactly the claim's GPUs, and
	// sets NCCL_TOPO_FILE and CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES
	// in rank order. On a claim of fewer than two GPUs it does nothing.
	NCCLTopoFile bool `json:"ncclTopoFile,omitempty"`
}

// PartitionConfig configures partitions (devices with type "partition": an
// NVIDIA MIG instance, an AMD compute partition).
type PartitionConfig struct {
	TypeMeta `json:",inline"`
	// Sharing as for GpuConfig, except that a partition has no time-slice
	// interval of its own: the interval is a whole-GPU setting and would
	// change it for every other partition's tenant.
	Sharing *Sharing `json:"sharing,omitempty"`
	// Topology is accepted so that one message explains why it cannot be
	// had: ncclTopoFile is refused on a partition (a MIG instance has no
	// peer-to-peer path, and the compute partitions of one AMD GPU share
	// its links, so no topology file would be true).
	Topology *TopologyConfig `json:"topology,omitempty"`
}

// SharingStrategy is how processes share a device.
type SharingStrategy string

const (
	// TimeSlicing: processes take turns on the whole device. Every GPU
	// does this natively; the interval can be set on NVIDIA GPUs.
	TimeSlicing SharingStrategy = "TimeSlicing"
	// MPS: NVIDIA's Multi-Process Service runs the processes concurrently
	// under one control daemon per claim, with limits on threads and
	// pinned memory.
	MPS SharingStrategy = "MPS"
)

// Sharing selects a strategy and its settings. Only the settings of the
// selected strategy may be given.
type Sharing struct {
	Strategy    SharingStrategy    `json:"strategy"`
	TimeSlicing *TimeSlicingConfig `json:"timeSlicing,omitempty"`
	MPS         *MPSConfig         `json:"mps,omitempty"`
}

// TimeSliceInterval is the length of a compute time slice, as NVIDIA's
// compute policy names them.
type TimeSliceInterval string

const (
	DefaultTimeSlice TimeSliceInterval = "Default"
	ShortTimeSlice   TimeSliceInterval = "Short"
	MediumTimeSlice  TimeSliceInterval = "Medium"
	LongTimeSlice    TimeSliceInterval = "Long"
)

// TimeSliceIntervals lists the valid intervals in order.
var TimeSliceIntervals = []TimeSliceInterval{DefaultTimeSlice, ShortTimeSlice, MediumTimeSlice, LongTimeSlice}

// TimeSlicingConfig is the TimeSlicing strategy's settings.
type TimeSlicingConfig struct {
	// Interval defaults to Default.
	Interval TimeSliceInterval `json:"interval,omitempty"`
}

// MPSConfig is the MPS strategy's settings. They become the claim's control
// daemon's defaults and the CUDA_MPS_* environment of its containers.
type MPSConfig struct {
	// DefaultActiveThreadPercentage caps the share of the device's threads
	// (SMs) one client may use, 1-100. Unset: no cap.
	DefaultActiveThreadPercentage *int32 `json:"defaultActiveThreadPercentage,omitempty"`
	// DefaultPinnedDeviceMemoryLimit caps the device memory one client may
	// pin on each device of the claim. Unset: no cap.
	DefaultPinnedDeviceMemoryLimit *Quantity `json:"defaultPinnedDeviceMemoryLimit,omitempty"`
	// DefaultPerDevicePinnedMemoryLimit overrides the default for single
	// devices, keyed by the allocated device's name (e.g. "gpu-3" or
	// "gpu-0-mig-1g-10gb-0").
	DefaultPerDevicePinnedMemoryLimit map[string]Quantity `json:"defaultPerDevicePinnedMemoryLimit,omitempty"`
}

// Quantity is a resource quantity ("10Gi", 1073741824). It decodes any
// string or number and is parsed by Validate, so a malformed value is
// reported with its field path rather than as a bare parse error.
type Quantity struct {
	raw    string
	parsed *resource.Quantity
}

// NewQuantity returns the quantity q (for building configs in code).
func NewQuantity(q resource.Quantity) Quantity {
	return Quantity{raw: q.String(), parsed: &q}
}

// MustParseQuantity is resource.MustParse as a Quantity.
func MustParseQuantity(s string) Quantity { return NewQuantity(resource.MustParse(s)) }

// String is the quantity as written.
func (q Quantity) String() string { return q.raw }

// Value parses the quantity.
func (q Quantity) Value() (resource.Quantity, error) {
	if q.parsed != nil {
		return *q.parsed, nil
	}
	return resource.ParseQuantity(q.raw)
}

// UnmarshalJSON implements json.Unmarshaler. It never fails: a string is
// kept as written, anything else as its JSON text, and Validate reports what
// does not parse with the field's path.
func (q *Quantity) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*q = Quantity{raw: s}
		return nil
	}
	*q = Quantity{raw: string(b)}
	return nil
}

// MarshalJSON implements json.Marshaler.
func (q Quantity) MarshalJSON() ([]byte, error) { return json.Marshal(q.raw) }
