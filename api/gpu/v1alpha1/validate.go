package v1alpha1

import (
	"fmt"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Limits a config must stay inside.
const (
	MinActiveThreadPercentage = 1
	MaxActiveThreadPercentage = 100
	// MinPinnedDeviceMemory is the smallest pinned-memory limit accepted:
	// below it no CUDA context fits and every client would fail.
	MinPinnedDeviceMemory = 256 << 20
)

func (c *GpuConfig) setDefaults()       { c.Sharing.setDefaults() }
func (c *PartitionConfig) setDefaults() { c.Sharing.setDefaults() }

func (s *Sharing) setDefaults() {
	if s == nil {
		return
	}
	if s.Strategy == TimeSlicing {
		if s.TimeSlicing == nil {
			s.TimeSlicing = &TimeSlicingConfig{}
		}
		if s.TimeSlicing.Interval == "" {
			s.TimeSlicing.Interval = DefaultTimeSlice
		}
	}
	if s.Strategy == MPS && s.MPS == nil {
		s.MPS = &MPSConfig{}
	}
}

func (c *GpuConfig) validate() field.ErrorList {
	errs := c.Sharing.validate(field.NewPath("sharing"))
	if t := c.Topology; t != nil && t.NCCLTopoFile && c.Sharing != nil && c.Sharing.Strategy == MPS {
		errs = append(errs, field.Forbidden(field.NewPath("topology", "ncclTopoFile"),
			"may not be set with sharing strategy MPS: both set the devices' CUDA_VISIBLE_DEVICES"))
	}
	return errs
}

func (c *PartitionConfig) validate() field.ErrorList {
	p := field.NewPath("sharing")
	errs := c.Sharing.validate(p)
	if s := c.Sharing; s != nil && s.TimeSlicing != nil && s.TimeSlicing.Interval != DefaultTimeSlice && s.TimeSlicing.Interval != "" {
		errs = append(errs, field.Invalid(p.Child("timeSlicing", "interval"), s.TimeSlicing.Interval,
			"a partition has no time-slice interval of its own (it is a whole-GPU setting); use Default or set it with a GpuConfig on a whole GPU"))
	}
	if t := c.Topology; t != nil && t.NCCLTopoFile {
		errs = append(errs, field.Forbidden(field.NewPath("topology", "ncclTopoFile"),
			"a partition has no topology file: a MIG instance has no peer-to-peer path and an AMD compute partition shares its GPU's links; claim whole GPUs with a GpuConfig"))
	}
	return errs
}

func (s *Sharing) validate(p *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	switch s.Strategy {
	case TimeSlicing:
		if s.MPS != nil {
			errs = append(errs, field.Forbidden(p.Child("mps"), "may only be set with strategy MPS"))
		}
		if s.TimeSlicing != nil && !slices.Contains(TimeSliceIntervals, s.TimeSlicing.Interval) && s.TimeSlicing.Interval != "" {
			errs = append(errs, field.NotSupported(p.Child("timeSlicing", "interval"), s.TimeSlicing.Interval, intervalNames()))
		}
	case MPS:
		if s.TimeSlicing != nil {
			errs = append(errs, field.Forbidden(p.Child("timeSlicing"), "may only be set with strategy TimeSlicing"))
		}
		errs = append(errs, s.MPS.validate(p.Child("mps"))...)
	case "":
		errs = append(errs, field.Required(p.Child("strategy"), fmt.Sprintf("one of %s, %s", TimeSlicing, MPS)))
	default:
		errs = append(errs, field.NotSupported(p.Child("strategy"), s.Strategy, []string{string(TimeSlicing), string(MPS)}))
	}
	return errs
}

func (m *MPSConfig) validate(p *field.Path) field.ErrorList {
	if m == nil {
		return nil
	}
	var errs field.ErrorList
	if t := m.DefaultActiveThreadPercentage; t != nil && (*t < MinActiveThreadPercentage || *t > MaxActiveThreadPercentage) {
		errs = append(errs, field.Invalid(p.Child("defaultActiveThreadPercentage"), *t, fmt.Sprintf("must be between %d and %d", MinActiveThreadPercentage, MaxActiveThreadPercentage)))
	}
	if q := m.DefaultPinnedDeviceMemoryLimit; q != nil {
		errs = append(errs, validateLimit(p.Child("defaultPinnedDeviceMemoryLimit"), *q)...)
	}
	keys := make([]string, 0, len(m.DefaultPerDevicePinnedMemoryLimit))
	for k := range m.DefaultPerDevicePinnedMemoryLimit {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		kp := p.Child("defaultPerDevicePinnedMemoryLimit").Key(k)
		if k == "" {
			errs = append(errs, field.Invalid(kp, k, "a device name such as gpu-0"))
			continue
		}
		errs = append(errs, validateLimit(kp, m.DefaultPerDevicePinnedMemoryLimit[k])...)
	}
	return errs
}

func validateLimit(p *field.Path, q Quantity) field.ErrorList {
	v, err := q.Value()
	if err != nil {
		return field.ErrorList{field.Invalid(p, q.String(), "must be a quantity such as 10Gi")}
	}
	if v.Value() < MinPinnedDeviceMemory {
		return field.ErrorList{field.Invalid(p, q.String(), "must be at least 256Mi")}
	}
	return nil
}

func intervalNames() []string {
	out := make([]string, len(TimeSliceIntervals))
	for i, v := range TimeSliceIntervals {
		out[i] = string(v)
	}
	return out
}
