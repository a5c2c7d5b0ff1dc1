package localcluster

import (
	"reflect"
	"slices"
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

// TestGateArgs: every control-plane component gets DRAAdminAccess; the
// Workload gates and API come only with Workloads.
func TestGateArgs(t *testing.T) {
	tests := []struct {
		name      string
		workloads bool
		apiServer bool
		want      []string
	}{
		{"scheduler", false, false, []string{"--feature-gates=DRAAdminAccess=true"}},
		{"API server", false, true, []string{"--feature-gates=DRAAdminAccess=true"}},
		{"scheduler with workloads", true, false, []string{"--feature-gates=DRAAdminAccess=true,GenericWorkload=true,DRAWorkloadResourceClaims=true,TopologyAwareWorkloadScheduling=true"}},
		{"API server with workloads", true, true, []string{"--feature-gates=DRAAdminAccess=true,GenericWorkload=true,DRAWorkloadResourceClaims=true,TopologyAwareWorkloadScheduling=true", "--runtime-config=" + WorkloadAPI + "=true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Config{Workloads: tt.workloads}
			if got := c.gateArgs(tt.apiServer); !slices.Equal(got, tt.want) {
				t.Errorf("gateArgs(%v) = %q, want %q", tt.apiServer, got, tt.want)
			}
		})
	}
}
