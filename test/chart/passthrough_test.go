package chart

import (
	"strings"
	"testing"
)

// TestPassthrough: passthrough.enabled turns the agent's --passthrough on
// and mounts the host's /sys read-write, which the agent needs to move a
// GPU between its driver and vfio-pci; off, and with backend sim (whose
// sysfs is its own tree), /sys stays read-only.
func TestPassthrough(t *testing.T) {
	for _, tc := range []struct {
		sets     []string
		flag     string
		readOnly bool
	}{
		{nil, "false", true},
		{[]string{"passthrough.enabled=true"}, "true", false},
		{[]string{"passthrough.enabled=true", "backend=amd"}, "true", false},
		{[]string{"passthrough.enabled=true", "backend=sim"}, "true", true},
	} {
		t.Run(strings.Join(append([]string{"defaults"}, tc.sets...), ","), func(t *testing.T) {
			_, c := daemonSet(t, render(t, tc.sets...))
			if got := env(c)["TESSERA_PASSTHROUGH"]; got != tc.flag {
				t.Errorf("TESSERA_PASSTHROUGH %q, want %q", got, tc.flag)
			}
			found := false
			for _, m := range c.VolumeMounts {
				if m.MountPath == "/sys" {
					found = true
					if m.ReadOnly != tc.readOnly {
						t.Errorf("/sys read-only %v, want %v", m.ReadOnly, tc.readOnly)
					}
				}
			}
			if !found {
				t.Error("/sys is not mounted")
			}
		})
	}
}
