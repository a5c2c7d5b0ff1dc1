package pci

import "regexp"

// rootRE is a PCIe root complex as sysfs names it in a device's path
// (/sys/devices/pci0000:15/0000:15:01.0/.../0000:18:00.0 has pci0000:15):
// "pci", the domain (four digits, more for domains above ffff such as
// VMD's 10000) and the root bus.
var rootRE = regexp.MustCompile(`^pci[0-9a-f]{4,8}:[0-9a-f]{2}$`)

// IsRoot reports whether s names a PCIe root complex, the value of the
// standard pcieRoot attribute.
func IsRoot(s string) bool { return rootRE.MatchString(s) }
