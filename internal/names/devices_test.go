package names

import "testing"

func TestPartition(t *testing.T) {
	tests := []struct {
		parent, kind, profile string
		start                 int
		want                  string
	}{
		{"gpu-7", "mig", "3g.40gb", 4, "gpu-7-mig-3g-40gb-4"},
		{"gpu-0", "mig", "1g.10gb+me", 6, "gpu-0-mig-1g-10gb-me-6"},
		{"gpu-2", "xcp", "CPX", 3, "gpu-2-xcp-cpx-3"},
		{"gpu-1", "mig", "1g.12gb_x", 0, "gpu-1-mig-1g-12gb-x-0"},
	}
	for _, tt := range tests {
		if got := Partition(tt.parent, tt.kind, tt.profile, tt.start); got != tt.want {
			t.Errorf("Partition(%q, %q, %q, %d) = %q, want %q", tt.parent, tt.kind, tt.profile, tt.start, got, tt.want)
		}
	}
}

func TestParentGPU(t *testing.T) {
	tests := []struct {
		name, want string
		ok         bool
	}{
		{"gpu-0", "gpu-0", true},
		{"gpu-12", "gpu-12", true},
		{"gpu-7-mig-3g-40gb-4", "gpu-7", true},
		{GPU(3), "gpu-3", true},
		{Partition(GPU(10), "xcp", "CPX", 1), "gpu-10", true},
		{"gpu-", "", false},
		{"gpu-x", "", false},
		{"gpu-1x", "", false},
		{"nic-0", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, ok := ParentGPU(tt.name)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParentGPU(%q) = %q, %v; want %q, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}
