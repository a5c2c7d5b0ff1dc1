package scenario

import (
	"path/filepath"
	"testing"
)

// TestAsksAdminAccess: the demo's monitor scenario asks admin access, so
// Apply labels its namespace; the others leave theirs as they are.
func TestAsksAdminAccess(t *testing.T) {
	for _, tt := range []struct {
		file string
		want bool
	}{
		{"20-gpu-monitor.yaml", true},
		{"02-an-h100.yaml", false},
		{"21-vm-passthrough.yaml", false},
	} {
		t.Run(tt.file, func(t *testing.T) {
			sc, err := Load(filepath.Join("..", "..", "..", "..", "demo", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if got := sc.AsksAdminAccess(); got != tt.want {
				t.Errorf("AsksAdminAccess() = %v, want %v", got, tt.want)
			}
		})
	}
}
