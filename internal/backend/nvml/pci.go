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
