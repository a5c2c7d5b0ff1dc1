package isolation

import (
	"reflect"
	"strings"
	"testing"
)

func TestReadHost(t *testing.T) {
	for _, tc := range []struct {
		root string
		want Host
		err  string
	}{
		{"testdata/v2-dmem", Host{Root: "testdata/v2-dmem", CgroupV2: true, Dmem: true, Regions: map[string]int64{
			"drm/0000:03:00.0/vram0": 206141652992, "nvidia/0000:18:00.0/vidmem": 85520809984}}, ""},
		{"testdata/v2-plain", Host{Root: "testdata/v2-plain", CgroupV2: true}, ""},
		{"testdata/v1", Host{Root: "testdata/v1"}, ""},
		{"testdata/missing", Host{Root: "testdata/missing"}, ""},
		{"testdata/bad-capacity", Host{}, `dmem.capacity:1: region drm/0000:03:00.0/vram0: size "lots" is not a byte count`},
	} {
		got, err := ReadHost(tc.root)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.root, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, %v; want %+v", tc.root, got, err, tc.want)
		}
	}
}
