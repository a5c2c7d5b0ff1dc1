package pci

import "testing"

func TestIsRoot(t *testing.T) {
	for s, want := range map[string]bool{
		"pci0000:15":   true,
		"pci0000:00":   true,
		"pci10000:00":  true, // a VMD domain
		"pci0000:1":    false,
		"pci000:15":    false,
		"pci0000:15.0": false,
		"0000:15:01.0": false,
		"PCI0000:15":   false,
		"":             false,
	} {
		if got := IsRoot(s); got != want {
			t.Errorf("IsRoot(%q) = %v, want %v", s, got, want)
		}
	}
}
