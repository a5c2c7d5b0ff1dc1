package pci

import "strings"

// Chain reads a device's place in the PCIe tree from its sysfs path
// (/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0,
// the target of /sys/bus/pci/devices/<bdf>): the root complex, and the bus
// IDs of the bridges between it and the device, root port first (the
// device itself left out). ok is false where the path names no root.
func Chain(sysfsPath, bdf string) (root string, bridges []string, ok bool) {
	parts := strings.Split(strings.ReplaceAll(sysfsPath, "\\", "/"), "/")
	i := 0
	for ; i < len(parts) && !IsRoot(parts[i]); i++ {
	}
	if i == len(parts) {
		return "", nil, false
	}
	root = parts[i]
	for _, c := range parts[i+1:] {
		if c == bdf {
			break
		}
		if b, err := Normalize(c); err == nil && b == c {
			bridges = append(bridges, c)
		}
	}
	return root, bridges, true
}
