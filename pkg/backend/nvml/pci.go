package nvml

import (
	"fmt"
	"strconv"
	"strings"
)

// normalizeBusID turns NVML's bus ID ("00000000:18:00.0", an 8-digit PCI
// domain, upper case hex) into the extended BDF the schema and sysfs use:
// 4-digit domain, lower case, "0000:18:00.0".
func normalizeBusID(s string) (string, error) {
	s = strings.TrimSpace(s)
	dom, rest, ok1 := strings.Cut(s, ":")
	bus, rest, ok2 := strings.Cut(rest, ":")
	dev, fn, ok3 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || !ok3 {
		return "", fmt.Errorf("PCI bus ID %q is not DOMAIN:BB:DD.F", s)
	}
	var v [4]uint64
	for i, p := range []string{dom, bus, dev, fn} {
		n, err := strconv.ParseUint(p, 16, 32)
		if err != nil {
			return "", fmt.Errorf("PCI bus ID %q is not DOMAIN:BB:DD.F", s)
		}
		v[i] = n
	}
	if v[0] > 0xffff || v[1] > 0xff || v[2] > 0x1f || v[3] > 7 {
		return "", fmt.Errorf("PCI bus ID %q is out of range", s)
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", v[0], v[1], v[2], v[3]), nil
}

// cString converts a NUL-terminated C char array as go-nvml returns it.
func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
