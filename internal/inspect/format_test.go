package inspect

import (
	"slices"
	"testing"
)

func TestHumanBytes(t *testing.T) {
	for _, tc := range []struct {
		in   int64
		want string
	}{
		{0, "0"},
		{512, "512"},
		{1 << 20, "1Mi"},
		{512 << 20, "512Mi"},
		{80 << 30, "80Gi"},
		{81559 << 20, "79.6Gi"}, // H100 80GB HBM3
		{23034 << 20, "22.5Gi"}, // L4
		{192 << 30, "192Gi"},
		{2 << 40, "2Ti"},
	} {
		if got := HumanBytes(tc.in); got != tc.want {
			t.Errorf("HumanBytes(%d) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCompareDeviceNames(t *testing.T) {
	got := []string{"gpu-10", "gpu-2", "gpu-1-mig-1g-10gb-6", "gpu-1", "gpu-1-mig-1g-10gb-10", "gpu-0"}
	slices.SortFunc(got, CompareDeviceNames)
	want := []string{"gpu-0", "gpu-1", "gpu-1-mig-1g-10gb-6", "gpu-1-mig-1g-10gb-10", "gpu-2", "gpu-10"}
	if !slices.Equal(got, want) {
		t.Errorf("sorted = %v, want %v", got, want)
	}
}
