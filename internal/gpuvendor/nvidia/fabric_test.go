package nvidia

import (
	"strings"
	"testing"

	"github.com/google/uuid"
)

func TestFabricDomain(t *testing.T) {
	gb200 := uuid.MustParse("00000001-0000-0000-0000-000000000001")
	for _, tc := range []struct {
		name string
		info FabricInfo
		want string // domain; "" with why containing whyHas
		why  string
	}{
		// The real GB200 capture (state Completed, status Success, clique 2).
		{"gb200", FabricInfo{State: FabricStateCompleted, ClusterUUID: gb200, CliqueID: 2}, "00000001-0000-0000-0000-000000000001.2", ""},
		{"gb300 clique", FabricInfo{State: FabricStateCompleted, ClusterUUID: gb200, CliqueID: 32766}, "00000001-0000-0000-0000-000000000001.32766", ""},
		// The real HGX H100 capture: completed, clique 0, all-zero UUID.
		{"hgx h100", FabricInfo{State: FabricStateCompleted}, "", "all-zero"},
		{"not supported", FabricInfo{State: FabricStateNotSupported, ClusterUUID: gb200}, "", "not supported"},
		{"not started", FabricInfo{State: FabricStateNotStarted, ClusterUUID: gb200}, "", "not complete"},
		{"in progress", FabricInfo{State: FabricStateInProgress, ClusterUUID: gb200}, "", "not complete"},
		{"failed", FabricInfo{State: FabricStateCompleted, Status: 999, ClusterUUID: gb200, CliqueID: 2}, "", "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := tc.info.Domain()
			if got != tc.want || (tc.want == "" && !strings.Contains(why, tc.why)) {
				t.Errorf("Domain() = %q, %q; want %q, why containing %q", got, why, tc.want, tc.why)
			}
			if len(got) > 64 {
				t.Errorf("%q is longer than an attribute string may be", got)
			}
		})
	}
}
