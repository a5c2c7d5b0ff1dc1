// Package pci is the one reading of PCI bus IDs (extended BDFs) in Tessera:
// NVML's 8-digit upper-case form, sysfs's 4-digit lower-case form and a
// machine file's, all to one canonical form that orders devices by address.
package pci

import (
	"fmt"
	"regexp"
	"strconv"
)

// BusID is a PCI address: domain, bus, device (0-31), function (0-7).
type BusID struct {
	Domain         uint32
	Bus, Dev, Func uint8
}

// busIDRE: a 4- to 8-digit domain (sysfs prints 4, NVML 8), two-digit bus
// and device, one-digit function, hexadecimal in either case.
var busIDRE = regexp.MustCompile(`^([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$`)

// ParseBusID parses an extended BDF, DDDD:BB:DD.F.
func ParseBusID(s string) (BusID, error) {
	m := busIDRE.FindStringSubmatch(s)
	if m == nil {
		return BusID{}, fmt.Errorf("PCI bus ID %q is not DDDD:BB:DD.F", s)
	}
	dom, err := strconv.ParseUint(m[1], 16, 32)
	if err != nil {
		return BusID{}, fmt.Errorf("PCI bus ID %q: domain out of range", s)
	}
	bus, _ := strconv.ParseUint(m[2], 16, 8)
	dev, _ := strconv.ParseUint(m[3], 16, 8)
	fn, _ := strconv.ParseUint(m[4], 16, 8)
	if dev > 0x1f {
		return BusID{}, fmt.Errorf("PCI bus ID %q: device %#x is out of range (0-1f)", s, dev)
	}
	return BusID{Domain: uint32(dom), Bus: uint8(bus), Dev: uint8(dev), Func: uint8(fn)}, nil
}

// Normalize is ParseBusID then String: "00000000:DB:00.0" -> "0000:db:00.0".
func Normalize(s string) (string, error) {
	b, err := ParseBusID(s)
	if err != nil {
		return "", err
	}
	return b.String(), nil
}

// String is the canonical form sysfs uses: 4-digit domain (more only when
// it does not fit), lower case.
func (b BusID) String() string {
	return fmt.Sprintf("%04x:%02x:%02x.%x", b.Domain, b.Bus, b.Dev, b.Func)
}

// Less orders addresses as the bus enumerates them.
func (b BusID) Less(o BusID) bool {
	if b.Domain != o.Domain {
		return b.Domain < o.Domain
	}
	if b.Bus != o.Bus {
		return b.Bus < o.Bus
	}
	if b.Dev != o.Dev {
		return b.Dev < o.Dev
	}
	return b.Func < o.Func
}
