package channelpool

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"

	"github.com/tessera-gpu/tessera/internal/names"
)

const (
	// DefaultChannels is how many channels a domain's pool offers (1 to
	// DefaultChannels): one slice's worth, 127 groups per domain, far
	// more than the 18 trays of an NVL72 can run at once with a GPU each.
	DefaultChannels = 127
	// MaxChannels is the most a pool may offer: the driver's default
	// NVreg_ImexChannelCount (2048) less channel 0.
	MaxChannels = 2047
	// perSlice is the most devices one slice holds (no counters, taints
	// or list attributes on channel devices).
	perSlice = resourceapi.ResourceSliceMaxDevices

	poolPrefix   = "imex-"
	devicePrefix = "imex-channel-"

	// TypeIMEXChannel is the type attribute of a channel device; the
	// DeviceClass imex.gpu.tessera.dev selects it.
	TypeIMEXChannel = "imexChannel"
	attrType        = "type"
	attrDomain      = "fabricDomain"
	// AttrChannel is the channel's number, the minor of its device node.
	AttrChannel = "imexChannel"
)

// PoolName is the name of domain's pool.
func PoolName(domain string) string { return poolPrefix + domain }

// DomainOf returns the domain whose pool is named pool, or false where pool
// is not a channel pool.
func DomainOf(pool string) (string, bool) {
	d, ok := strings.CutPrefix(pool, poolPrefix)
	return d, ok && d != ""
}

// DeviceName is channel ch's device name.
func DeviceName(ch int) string { return devicePrefix + strconv.Itoa(ch) }

// ChannelOf returns the channel a device name is, or false.
func ChannelOf(device string) (int, bool) {
	s, ok := strings.CutPrefix(device, devicePrefix)
	if !ok {
		return 0, false
	}
	ch, err := strconv.Atoi(s)
	if err != nil || ch < 1 || ch > MaxChannels || strconv.Itoa(ch) != s {
		return 0, false
	}
	return ch, true
}

// CheckDomain reports whether domain can name a pool and be a node label's
// value (the label is how the slices select the domain's nodes).
func CheckDomain(domain string) error {
	if errs := validation.IsValidLabelValue(domain); len(errs) > 0 || domain == "" {
		return fmt.Errorf("fabric domain %q is not a label value: %s", domain, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(PoolName(domain)); len(errs) > 0 {
		return fmt.Errorf("fabric domain %q does not make a pool name: %s", domain, strings.Join(errs, "; "))
	}
	return nil
}

// Pool is domain's pool of channels 1 to n: slices of at most 128
// devices, each slice selecting the nodes labelled with the domain.
func Pool(domain string, n int) (resourceslice.Pool, error) {
	if err := CheckDomain(domain); err != nil {
		return resourceslice.Pool{}, err
	}
	if n < 1 || n > MaxChannels {
		return resourceslice.Pool{}, fmt.Errorf("%d IMEX channels per domain: want 1 to %d", n, MaxChannels)
	}
	var slices []resourceslice.Slice
	for first := 1; first <= n; first += perSlice {
		var devs []resourceapi.Device
		for ch := first; ch <= n && ch < first+perSlice; ch++ {
			devs = append(devs, device(domain, ch))
		}
		slices = append(slices, resourceslice.Slice{Devices: devs})
	}
	return resourceslice.Pool{NodeSelector: NodeSelector(domain), Slices: slices}, nil
}

// NodeSelector selects the nodes of domain.
func NodeSelector(domain string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: names.NodeLabelFabricDomain, Operator: corev1.NodeSelectorOpIn, Values: []string{domain}}},
	}}}
}

func device(domain string, ch int) resourceapi.Device {
	return resourceapi.Device{
		Name: DeviceName(ch),
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			attrType:    {StringValue: ptr.To(TypeIMEXChannel)},
			attrDomain:  {StringValue: ptr.To(domain)},
			AttrChannel: {IntValue: ptr.To(int64(ch))},
		},
	}
}
