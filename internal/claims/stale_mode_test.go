package claims

import (
	"errors"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestStaleModeHolderReleased: a prepare that needs its GPU in another
// partition mode than the one a prepared claim holds it in asks the API
// server about that holder, as a device conflict does: a holder proven gone
// is released, the GPU rests and takes the new mode; a holder still
// allocated, or one the API server cannot answer for, refuses the prepare
// naming it, the GPU left in its mode. The QPX partition at 0 overlaps no
// XCD of the CPX one at 3: only the mode keeps them apart.
func TestStaleModeHolderReleased(t *testing.T) {
	const refusal = "is in partition mode CPX and claim uid-old holds a device of it: the mode cannot change to QPX until it is released"
	cases := []struct {
		name string
		api  func(old *resourceapi.ResourceClaim) []runtime.Object
		fail error
		want Evidence // "": refused
	}{
		{name: "deleted", api: func(*resourceapi.ResourceClaim) []runtime.Object { return nil }, want: EvidenceDeleted},
		{name: "deallocated", api: func(old *resourceapi.ResourceClaim) []runtime.Object {
			c := old.DeepCopy()
			c.Status.Allocation = nil
			return []runtime.Object{c}
		}, want: EvidenceDeallocated},
		{name: "still-allocated", api: func(old *resourceapi.ResourceClaim) []runtime.Object { return []runtime.Object{old.DeepCopy()} }},
		{name: "unavailable", api: func(*resourceapi.ResourceClaim) []runtime.Object { return nil },
			fail: apierrors.NewServiceUnavailable("etcd leader changed")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := modeEnv(t)
			old, new := allocated("old", "gpu-0-xcp-cpx-3"), allocated("new", "gpu-0-xcp-qpx-0")
			api := e.withAPI(tc.api(old)...)
			if tc.fail != nil {
				api.failGets(tc.fail)
			}
			m, res := e.start(nil)
			ctx := ctxFor(t)
			gpu := res.Devices["gpu-0"].GPU.UUID
			if _, err := m.Prepare(ctx, old); err != nil {
				t.Fatal(err)
			}

			_, err := m.Prepare(ctx, new)
			if gets := api.gets(t); gets != 1 {
				t.Errorf("%d GETs of the holder, want 1", gets)
			}
			if tc.want == "" {
				if !errors.Is(err, ErrDeviceInUse) || !strings.Contains(err.Error(), refusal) {
					t.Fatalf("prepare: %v, want ErrDeviceInUse saying %q", err, refusal)
				}
				if _, ok := m.Prepared()["uid-old"]; !ok || !e.hasSpec("uid-old") {
					t.Errorf("the holder lost its entry (%v) or spec (%v)", ok, e.hasSpec("uid-old"))
				}
				if mode, n := e.modeOf(gpu); mode != "CPX" || n != 8 {
					t.Errorf("after the refusal the GPU is in %s with %d partitions, want CPX with 8", mode, n)
				}
				if got := api.released(); len(got) != 0 {
					t.Errorf("released %v", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("prepare after the holder was %s: %v", tc.want, err)
			}
			if got := api.released(); !slices.Equal(got, []Evidence{tc.want}) {
				t.Errorf("released %v, want [%s]", got, tc.want)
			}
			if _, ok := recordedOnDisk(t, e)["uid-old"]; ok || e.hasSpec("uid-old") {
				t.Errorf("the stale claim kept its entry (%v) or spec (%v)", ok, e.hasSpec("uid-old"))
			}
			if mode, n := e.modeOf(gpu); mode != "QPX" || n != 4 {
				t.Errorf("the GPU is in %s with %d partitions, want QPX with 4", mode, n)
			}
			if rec := m.Prepared()["uid-new"].Devices[0]; rec.Profile != "QPX" || rec.PartitionUUID == "" {
				t.Errorf("the new claim recorded %+v, want its QPX partition", rec)
			}
		})
	}
}
