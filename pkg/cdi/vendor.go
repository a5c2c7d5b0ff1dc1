package cdi

import (
	"fmt"

	"github.com/tessera-gpu/tessera/pkg/inventory"
)

// vendorRules is what a container needs for one vendor's devices. Paths are
// relative to /dev, the form backend.Backend.DeviceNumbers takes.
type vendorRules struct {
	// deviceNodes are the nodes of one allocated device.
	deviceNodes func(d ClaimDevice) ([]string, error)
	// commonNodes are the nodes every container with at least one of the
	// vendor's devices needs exactly once.
	commonNodes []string
	// commonEnv is the environment of the vendor's common device, given all
	// of the claim's devices of that vendor in claim order.
	commonEnv func(devs []ClaimDevice) ([]string, error)
}

// rules is the one place that knows vendors. A vendor missing here cannot be
// prepared: WriteClaimSpec fails rather than hand out a device without its
// nodes.
var rules = map[inventory.Vendor]vendorRules{
	inventory.VendorNVIDIA: nvidiaRules,
	inventory.VendorAMD:    amdRules,
}

func rulesFor(v inventory.Vendor) (vendorRules, error) {
	r, ok := rules[v]
	if !ok {
		return vendorRules{}, fmt.Errorf("no CDI rules for vendor %q", v)
	}
	return r, nil
}

func checkMinor(what string, n int) error {
	if n < 0 {
		return fmt.Errorf("%s %d is negative", what, n)
	}
	return nil
}
