package sharing

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/tessera-gpu/tessera/api/gpu/v1alpha1"
	"github.com/tessera-gpu/tessera/internal/gpuvendor/vendors"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// Device is an allocated device as Resolve needs to know it.
type Device struct {
	// Request is the allocation result's request: "req", or "req/sub" for
	// a firstAvailable subrequest.
	Request string
	Name    string
	// Partition is true for a partition (MIG, XCP), false for a whole GPU.
	Partition   bool
	Vendor      inventory.Vendor
	MemoryBytes int64
	// ComputeUnits is the device's whole count, for a share's percentage.
	ComputeUnits int64
	// Share is set when the claim got part of a multi-allocatable device.
	Share *Share
}

// config is one decoded opaque config of the allocation.
type config struct {
	index    int // in status.allocation.devices.config
	source   resourceapi.AllocationConfigSource
	requests []string
	obj      v1alpha1.Config
}

// field names a field of the config's parameters as the allocation holds
// them, and where the config came from (the claim or its class).
func (c *config) field(sub string) string {
	p := fmt.Sprintf("status.allocation.devices.config[%d].opaque.parameters", c.index)
	if sub != "" {
		p += "." + sub
	}
	return p + " (from " + strings.ToLower(strings.TrimPrefix(string(c.source), "From")) + ")"
}

func (c *config) appliesTo(request string) bool {
	if len(c.requests) == 0 {
		return true
	}
	parent, _, _ := strings.Cut(request, "/")
	return slices.Contains(c.requests, request) || slices.Contains(c.requests, parent)
}

// Resolve returns the sharing settings of each device in devs (nil where no
// config applies), from the allocation's configs addressed to driver. For
// each device the last config that applies to its request and whose kind is
// for its device type wins, class configs before the claim's, so the claim
// overrides its class. A config that names the request but is for the other
// device type is an error, as is one the device cannot honour; every error
// names the config, request and device.
func Resolve(driver string, allocConfigs []resourceapi.DeviceAllocationConfiguration, devs []Device) ([]*Settings, error) {
	cfgs, err := decodeAll(driver, allocConfigs)
	if err != nil {
		return nil, err
	}
	out := make([]*Settings, len(devs))
	var errs []error
	for i, d := range devs {
		s, err := resolveOne(cfgs, d, devs)
		if err != nil {
			errs = append(errs, fmt.Errorf("request %q, device %s: %w", d.Request, d.Name, err))
			continue
		}
		out[i] = s
	}
	if len(errs) == 0 {
		errs = append(errs, checkClaimWide(out, devs))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// decodeAll decodes this driver's configs, class ones first.
func decodeAll(driver string, in []resourceapi.DeviceAllocationConfiguration) ([]config, error) {
	var out []config
	var errs []error
	for i, c := range in {
		if c.Opaque == nil || c.Opaque.Driver != driver {
			continue
		}
		obj, err := v1alpha1.Decode(c.Opaque.Parameters.Raw)
		cfg := config{index: i, source: c.Source, requests: c.Requests, obj: obj}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", cfg.field(""), err))
			continue
		}
		out = append(out, cfg)
	}
	sort.SliceStable(out, func(a, b int) bool {
		return out[a].source == resourceapi.AllocationConfigSourceClass && out[b].source != resourceapi.AllocationConfigSourceClass
	})
	return out, errors.Join(errs...)
}

func resolveOne(cfgs []config, d Device, all []Device) (*Settings, error) {
	pick, err := pickFor(cfgs, d)
	if err != nil {
		return nil, err
	}
	if d.Share != nil {
		if pick != nil && pick.obj.GetSharing() != nil {
			return nil, fmt.Errorf("%s: the device is a capacity share (%s) whose limits come from the capacity it consumed; a sharing config cannot apply to it: drop the config, or ask for the whole device", pick.field("sharing"), d.Share)
		}
		return shareSettings(d), nil
	}
	if pick == nil || pick.obj.GetSharing() == nil {
		return nil, nil
	}
	sh := pick.obj.GetSharing()
	s := &Settings{Strategy: sh.Strategy}
	caps := vendors.Capabilities(d.Vendor)
	switch sh.Strategy {
	case v1alpha1.TimeSlicing:
		if !d.Partition {
			s.TimeSlice = sh.TimeSlicing.Interval
		}
		if !caps.TimeSliceIntervals && s.TimeSlice != v1alpha1.DefaultTimeSlice && s.TimeSlice != "" {
			return nil, fmt.Errorf("%s: %s cannot be set on %s GPUs (they time-slice at a fixed interval; use Default)", pick.field("sharing.timeSlicing.interval"), s.TimeSlice, strings.ToUpper(string(d.Vendor)))
		}
	case v1alpha1.MPS:
		if !caps.MPS {
			return nil, fmt.Errorf("%s: MPS is not supported on %s GPUs (MPS is NVIDIA's; use TimeSlicing)", pick.field("sharing.strategy"), strings.ToUpper(string(d.Vendor)))
		}
		m := sh.MPS
		if m.DefaultActiveThreadPercentage != nil {
			s.MPSActiveThreadPercentage = *m.DefaultActiveThreadPercentage
		}
		limitPath, limit := "", (*v1alpha1.Quantity)(nil)
		if m.DefaultPinnedDeviceMemoryLimit != nil {
			limitPath, limit = "sharing.mps.defaultPinnedDeviceMemoryLimit", m.DefaultPinnedDeviceMemoryLimit
		}
		for _, key := range slices.Sorted(maps.Keys(m.DefaultPerDevicePinnedMemoryLimit)) {
			if !slices.ContainsFunc(all, func(o Device) bool { return o.Name == key && pick.appliesTo(o.Request) }) {
				return nil, fmt.Errorf("%s: no device of that name is allocated to the requests this config applies to", pick.field("sharing.mps.defaultPerDevicePinnedMemoryLimit["+key+"]"))
			}
			if key == d.Name {
				q := m.DefaultPerDevicePinnedMemoryLimit[key]
				limitPath, limit = "sharing.mps.defaultPerDevicePinnedMemoryLimit["+key+"]", &q
			}
		}
		if limit != nil {
			v, err := limit.Value()
			if err != nil { // Decode validated it; kept for safety
				return nil, fmt.Errorf("%s: %w", pick.field(limitPath), err)
			}
			if d.MemoryBytes > 0 && v.Value() > d.MemoryBytes {
				return nil, fmt.Errorf("%s: %s is more than the device's memory (%s)", pick.field(limitPath), limit, resource.NewQuantity(d.MemoryBytes, resource.BinarySI))
			}
			s.MPSPinnedMemoryLimit = v.Value()
		}
	}
	return s, nil
}

// checkClaimWide checks what one claim's devices must agree on: a claim has
// one MPS daemon, so either all its devices run under it or none, and the
// daemon's default thread percentage is one number.
func checkClaimWide(ss []*Settings, devs []Device) error {
	for i, s := range ss {
		if s.SharedDaemon() && len(devs) > 1 {
			return fmt.Errorf("device %s is a share of an NVIDIA GPU, run by that GPU's MPS daemon, and a container connects to one MPS daemon: a claim holding such a share can hold no other device (it has %d); use one claim per share", devs[i].Name, len(devs))
		}
	}
	var mps, other []string
	threads := map[int32][]string{}
	for i, s := range ss {
		if s.IsMPS() {
			mps = append(mps, devs[i].Name)
			threads[s.MPSActiveThreadPercentage] = append(threads[s.MPSActiveThreadPercentage], devs[i].Name)
		} else {
			other = append(other, devs[i].Name)
		}
	}
	if len(mps) == 0 {
		return nil
	}
	if len(other) > 0 {
		return fmt.Errorf("devices %v are configured for MPS and %v are not: a claim's containers connect to its one MPS daemon, which must serve all of the claim's devices; configure MPS for every request or split the claim", mps, other)
	}
	if len(threads) > 1 {
		return fmt.Errorf("MPS defaultActiveThreadPercentage differs between devices of the claim (%v): the claim's one MPS daemon has one default", threads)
	}
	return nil
}
