package localcluster

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseNodes(t *testing.T) {
	tests := []struct {
		in      string
		want    []Node
		wantErr string
	}{
		{in: "a=dgx-h100", want: []Node{{Name: "a", Profile: "dgx-h100"}}},
		{in: "a=dgx-h100:dynamic, b=mi300x-8:static", want: []Node{{Name: "a", Profile: "dgx-h100", Partitioning: "dynamic"}, {Name: "b", Profile: "mi300x-8", Partitioning: "static"}}},
		{in: "a=dgx-h100:sometimes", wantErr: `partitioning "sometimes"`},
		{in: "a=l4-4:static:capacity", want: []Node{{Name: "a", Profile: "l4-4", Partitioning: "static", Sharing: "capacity"}}},
		{in: "a=l4-4::capacity", want: []Node{{Name: "a", Profile: "l4-4", Sharing: "capacity"}}},
		{in: "a=l4-4:static:mps", wantErr: `sharing "mps"`},
		{in: "a", wantErr: "want name=profile"},
		{in: "=dgx-h100", wantErr: "want name=profile"},
		{in: "a=:dynamic", wantErr: "want name=profile"},
	}
	for _, tc := range tests {
		got, err := ParseNodes(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: err %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	if s := (Node{}).SharingOf(); s != "none" {
		t.Errorf("default sharing %q", s)
	}
	if p := (Node{}).PartitioningOf(); p != "static" {
		t.Errorf("default partitioning %q", p)
	}
}
