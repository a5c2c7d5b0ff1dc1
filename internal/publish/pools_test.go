package publish

import (
	"reflect"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/names"
)

func slice(driver, pool string, gen, count int64, devices int) resourceapi.ResourceSlice {
	return resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{
		Driver:  driver,
		Pool:    resourceapi.ResourcePool{Name: pool, Generation: gen, ResourceSliceCount: count},
		Devices: make([]resourceapi.Device, devices),
	}}
}

func TestPools(t *testing.T) {
	d := names.DriverName
	tests := []struct {
		name     string
		slices   []resourceapi.ResourceSlice
		want     map[string]*PoolState
		complete map[string]bool
		missing  map[string]bool
	}{
		{
			name:     "complete",
			slices:   []resourceapi.ResourceSlice{slice(d, "n1", 3, 2, 8), slice(d, "n1", 3, 2, 1)},
			want:     map[string]*PoolState{"n1": {Generation: 3, Want: 2, Slices: 2, Devices: 9}},
			complete: map[string]bool{"n1": true},
		},
		{
			name:    "one of two",
			slices:  []resourceapi.ResourceSlice{slice(d, "n1", 3, 2, 8)},
			want:    map[string]*PoolState{"n1": {Generation: 3, Want: 2, Slices: 1, Devices: 8}},
			missing: map[string]bool{"n1": true},
		},
		{
			name:     "older generations left over, another driver ignored",
			slices:   []resourceapi.ResourceSlice{slice(d, "n1", 1, 1, 8), slice(d, "n1", 4, 1, 8), slice(d, "n1", 2, 1, 8), slice(d, "n1", 1, 1, 8), slice("gpu.nvidia.com", "n1", 9, 1, 1)},
			want:     map[string]*PoolState{"n1": {Generation: 4, Want: 1, Slices: 1, Devices: 8, Older: 3, OlderGenerations: []int64{1, 2}}},
			complete: map[string]bool{"n1": true},
		},
		{
			name:   "counts disagree, more than either says",
			slices: []resourceapi.ResourceSlice{slice(d, "n1", 2, 1, 1), slice(d, "n1", 2, 2, 1), slice(d, "n1", 2, 2, 1)},
			want:   map[string]*PoolState{"n1": {Generation: 2, Want: 2, CountsDiffer: true, Slices: 3, Devices: 3}},
		},
		{
			name:     "two pools",
			slices:   []resourceapi.ResourceSlice{slice(d, "n1", 1, 1, 1), slice(d, "n2", 5, 2, 1)},
			want:     map[string]*PoolState{"n1": {Generation: 1, Want: 1, Slices: 1, Devices: 1}, "n2": {Generation: 5, Want: 2, Slices: 1, Devices: 1}},
			complete: map[string]bool{"n1": true},
			missing:  map[string]bool{"n2": true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Pools(tt.slices, d)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Pools = %+v, want %+v", got, tt.want)
			}
			for name, st := range got {
				if st.Complete() != tt.complete[name] {
					t.Errorf("pool %s: Complete() = %v", name, st.Complete())
				}
				if st.Missing() != tt.missing[name] {
					t.Errorf("pool %s: Missing() = %v", name, st.Missing())
				}
			}
		})
	}
}
