package nvml

import (
	"strings"

	"github.com/tessera-gpu/tessera/internal/pci"
)

// normalizeBusID turns NVML's bus ID ("00000000:18:00.0", an 8-digit PCI
// domain, upper case hex) into the extended BDF the schema and sysfs use:
// 4-digit domain, lower case, "0000:18:00.0" (internal/pci, the one parser).
func normalizeBusID(s string) (string, error) {
	return pci.Normalize(strings.TrimSpace(s))
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

// isPlaceholderBusID reports NVML's "no PCI device" bus ID, which
// nvmlDeviceGetNvLinkRemotePciInfo gives for NVSwitch links on systems
// whose switches have no PCI function on the host (GB200/GB300 trays):
// domain, bus and device all ones, "FFFFFFFF:FF:FF.0" (any case, any
// domain width).
func isPlaceholderBusID(s string) bool {
	dom, rest, ok := strings.Cut(strings.ToLower(strings.TrimSpace(s)), ":")
	return ok && strings.Trim(dom, "f") == "" && strings.HasPrefix(rest, "ff:ff.")
}
