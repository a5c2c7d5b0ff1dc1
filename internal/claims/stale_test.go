package claims

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// staleAPI is the API server the manager asks about holders: client-go's
// fake clientset, and what the manager was told it released.
type staleAPI struct {
	client *fake.Clientset
	mu     sync.Mutex
	evs    []Evidence
	// during, if set, runs inside each GET, before the answer.
	during func()
}

// withAPI makes e's managers GET holders from a fake API server holding objs.
func (e *env) withAPI(objs ...runtime.Object) *staleAPI {
	a := &staleAPI{client: fake.NewClientset(objs...)}
	e.getClaim = func(ctx context.Context, namespace, name string) (*resourceapi.ResourceClaim, error) {
		if a.during != nil {
			a.during()
		}
		return a.client.ResourceV1().ResourceClaims(namespace).Get(ctx, name, metav1.GetOptions{})
	}
	e.released = func(ev Evidence, _ string, _ ClaimRef) {
		a.mu.Lock()
		a.evs = append(a.evs, ev)
		a.mu.Unlock()
	}
	return a
}

func (a *staleAPI) released() []Evidence {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.evs)
}

// gets counts the API calls and fails the test on any but a claim GET:
// the agent may not list or watch claims.
func (a *staleAPI) gets(t *testing.T) int {
	t.Helper()
	n := 0
	for _, act := range a.client.Actions() {
		if act.GetVerb() != "get" || act.GetResource().Resource != "resourceclaims" {
			t.Errorf("API call %s %s, want only claim GETs", act.GetVerb(), act.GetResource().Resource)
		}
		n++
	}
	return n
}

// failGets makes every claim GET fail with err.
func (a *staleAPI) failGets(err error) {
	a.client.PrependReactor("get", "resourceclaims", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, err })
}

func recordedOnDisk(t *testing.T, e *env) map[string]*checkpoint.Claim {
	t.Helper()
	cp, err := checkpoint.Read(e.checkpointPath())
	if err != nil {
		t.Fatal(err)
	}
	return cp.Claims
}

// TestStaleClaimReleased: a prepared claim holding the device another
// claim is allocated is released on each of the API server's conclusive
// answers, and only on those, with what an unprepare does (spec, entry in
// the checkpoint file, MPS daemon, partitions); a holder still allocated
// the device, or an answer that is an error, refuses the prepare as before.
func TestStaleClaimReleased(t *testing.T) {
	svcErr := apierrors.NewServiceUnavailable("etcd leader changed")
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, "old", errors.New("RBAC"))
	cases := []struct {
		name string
		env  func(t *testing.T) *env
		// old is prepared first; api is what the API server then holds
		// under its name; fail, if set, fails every GET.
		old, new *resourceapi.ResourceClaim
		api      func(old *resourceapi.ResourceClaim) []runtime.Object
		fail     error
		want     Evidence // "": refused
	}{
		{name: "deleted", old: allocated("old", "gpu-7"), new: allocated("new", "gpu-7"),
			api: func(*resourceapi.ResourceClaim) []runtime.Object { return nil }, want: EvidenceDeleted},
		{name: "replaced", old: allocated("old", "gpu-7"), new: allocated("new", "gpu-7"),
			api: func(*resourceapi.ResourceClaim) []runtime.Object {
				c := allocated("old", "gpu-3")
				c.UID = types.UID("uid-old-2")
				return []runtime.Object{c}
			}, want: EvidenceReplaced},
		{name: "deallocated", old: allocated("old", "gpu-7"), new: allocated("new", "gpu-7"),
			api: func(old *resourceapi.ResourceClaim) []runtime.Object {
				c := old.DeepCopy()
				c.Status.Allocation = nil
				return []runtime.Object{c}
			}, want: EvidenceDeallocated},
		{name: "allocated-elsewhere", old: allocated("old", "gpu-7"), new: allocated("new", "gpu-7"),
			api: func(*resourceapi.ResourceClaim) []runtime.Object {
				c := allocated("old", "gpu-3")
				c.Status.Allocation.Devices.Results[0].Pool = "node-2"
				return []runtime.Object{c}
			}, want: EvidenceDeallocated},
		{name: "still-allocated", old: allocated("old", "gpu-7"), new: allocated("new", "gpu-7"),
			api: func(old *resourceapi.ResourceClaim) []runtime.Object { return []runtime.Object{old.DeepCopy()} }},
		{name: "still-allocated-one-of-two", old: allocated("old", "gpu-6", "gpu-7"), new: allocated("new", "gpu-7"),
			api: func(*resourceapi.ResourceClaim) []runtime.Object { return []runtime.Object{allocated("old", "gpu-6")} }},
		{name: "being-deleted-still-allocated", old: allocated("old", "gpu-7"), new: allocated("new", "gpu-7"),
			api: func(old *resourceapi.ResourceClaim) []runtime.Object {
				c := old.DeepCopy()
				now := metav1.Now()
				c.DeletionTimestamp, c.Finalizers = &now, []string{"resource.kubernetes.io/delete-protection"}
				return []runtime.Object{c}
			}},
		{name: "unavailable", old: allocated("old", "gpu-7"), new: allocated("new", "gpu-7"),
			api: func(*resourceapi.ResourceClaim) []runtime.Object { return nil }, fail: svcErr},
		{name: "forbidden", old: allocated("old", "gpu-7"), new: allocated("new", "gpu-7"),
			api: func(*resourceapi.ResourceClaim) []runtime.Object { return nil }, fail: forbidden},
		{name: "mps-deleted", env: func(t *testing.T) *env { return sharingEnv(t, "mixed-inference") },
			old: configured("old", mpsHalf, "gpu-0"), new: allocated("new", "gpu-0"),
			api: func(*resourceapi.ResourceClaim) []runtime.Object { return nil }, want: EvidenceDeleted},
		{name: "partition-deleted", env: func(t *testing.T) *env { return dynamicEnv(t, "dgx-h100") },
			old: allocated("old", "gpu-7-mig-1g-10gb-6"), new: allocated("new", "gpu-7"),
			api: func(*resourceapi.ResourceClaim) []runtime.Object { return nil }, want: EvidenceDeleted},
		// A stale share leaves no room on its GPU for one the scheduler
		// fitted there (23034Mi L4s: two 20Gi shares do not fit).
		{name: "share-deleted", env: func(t *testing.T) *env { return capacityEnv(t, "l4-4") },
			old: shareClaim("old", "gpu-0", "20Gi", 0), new: shareClaim("new", "gpu-0", "20Gi", 0),
			api: func(*resourceapi.ResourceClaim) []runtime.Object { return nil }, want: EvidenceDeleted},
		{name: "share-still-allocated", env: func(t *testing.T) *env { return capacityEnv(t, "l4-4") },
			old: shareClaim("old", "gpu-0", "20Gi", 0), new: shareClaim("new", "gpu-0", "20Gi", 0),
			api: func(old *resourceapi.ResourceClaim) []runtime.Object { return []runtime.Object{old.DeepCopy()} }},
		{name: "partition-still-allocated", env: func(t *testing.T) *env { return dynamicEnv(t, "dgx-h100") },
			old: allocated("old", "gpu-7-mig-1g-10gb-6"), new: allocated("new", "gpu-7"),
			api: func(old *resourceapi.ResourceClaim) []runtime.Object { return []runtime.Object{old.DeepCopy()} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, "dgx-h100")
			if tc.env != nil {
				e = tc.env(t)
			}
			api := e.withAPI(tc.api(tc.old)...)
			if tc.fail != nil {
				api.failGets(tc.fail)
			}
			m, _ := e.start(nil)
			ctx := ctxFor(t)
			if _, err := m.Prepare(ctx, tc.old); err != nil {
				t.Fatal(err)
			}
			gpu := m.Prepared()["uid-old"].Devices[0].GPUUUID
			_, daemon := e.daemon("uid-old")
			partitions := len(e.gpuState(gpu).Partitions)
			if gets := api.gets(t); gets != 0 {
				t.Fatalf("%d GETs before any conflict", gets)
			}

			_, err := m.Prepare(ctx, tc.new)
			if gets := api.gets(t); gets != 1 {
				t.Errorf("%d GETs of the holder, want 1", gets)
			}
			if tc.want == "" {
				if !errors.Is(err, ErrDeviceInUse) {
					t.Fatalf("prepare: %v, want ErrDeviceInUse", err)
				}
				if _, ok := m.Prepared()["uid-old"]; !ok || !e.hasSpec("uid-old") {
					t.Errorf("the holder lost its entry (%v) or spec (%v)", ok, e.hasSpec("uid-old"))
				}
				if _, ok := recordedOnDisk(t, e)["uid-old"]; !ok {
					t.Error("the holder is gone from the checkpoint file")
				}
				if _, ok := e.daemon("uid-old"); ok != daemon {
					t.Errorf("the holder's MPS daemon: %v, was %v", ok, daemon)
				}
				if n := len(e.gpuState(gpu).Partitions); n != partitions {
					t.Errorf("%d partitions on the holder's GPU, was %d", n, partitions)
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
			if _, ok := m.Prepared()["uid-old"]; ok || e.hasSpec("uid-old") {
				t.Errorf("the stale claim kept its entry (%v) or spec (%v)", ok, e.hasSpec("uid-old"))
			}
			onDisk := recordedOnDisk(t, e)
			if _, ok := onDisk["uid-old"]; ok {
				t.Error("the stale claim is still in the checkpoint file")
			}
			if c, ok := onDisk["uid-new"]; !ok || c.State != checkpoint.PrepareCompleted {
				t.Errorf("the new claim in the checkpoint file: %+v", c)
			}
			if _, ok := e.daemon("uid-old"); ok {
				t.Error("the stale claim's MPS daemon runs on")
			}
			if g := e.gpuState(gpu); len(g.Partitions) != 0 || (g.Partitioning != nil && g.Partitioning.Enabled) {
				t.Errorf("the stale claim's GPU still has partitions %v (MIG mode %v)", g.Partitions, g.Partitioning)
			}
		})
	}
}

// TestStaleClaimReleaseCrash: a release stopped at each step of its
// unprepare is finished by the next start or by the kubelet's retry of
// the new claim, as an unprepare is.
func TestStaleClaimReleaseCrash(t *testing.T) {
	for _, dynamic := range []bool{false, true} {
		for _, step := range []crashStep{stepUnprepareStarted, stepSpecRemoved, stepUnprepareFinished} {
			name, old, new := string(step), allocated("old", "gpu-7"), allocated("new", "gpu-7")
			if dynamic {
				name, old = "dynamic/"+name, allocated("old", "gpu-7-mig-1g-10gb-6", "gpu-7-mig-3g-40gb-0")
			}
			t.Run(name, func(t *testing.T) {
				e := newEnv(t, "dgx-h100")
				if dynamic {
					e.partitioning = publish.Dynamic
				}
				api := e.withAPI()
				m, _ := e.start(crashAt(step))
				ctx := ctxFor(t)
				if _, err := m.Prepare(ctx, old); err != nil {
					t.Fatal(err)
				}
				if _, err := m.Prepare(ctx, new); !errors.Is(err, errInjected) {
					t.Fatalf("prepare: %v, want the injected stop", err)
				}
				m, _ = e.start(nil)
				if _, err := m.Prepare(ctx, new); err != nil {
					t.Fatalf("retry after the restart: %v", err)
				}
				if _, ok := m.Prepared()["uid-old"]; ok || e.hasSpec("uid-old") {
					t.Errorf("the stale claim kept its entry (%v) or spec (%v)", ok, e.hasSpec("uid-old"))
				}
				if _, ok := recordedOnDisk(t, e)["uid-old"]; ok {
					t.Error("the stale claim is still in the checkpoint file")
				}
				if n := e.totalPartitions(); n != 0 {
					t.Errorf("%d partitions left", n)
				}
				e.assertConsistent(m, "uid-new")
				// Counted once done: by the retry, or not at all where
				// the restart finished it.
				if got := api.released(); len(got) > 1 || (len(got) == 1 && got[0] != EvidenceDeleted) {
					t.Errorf("released %v", got)
				}
			})
		}
	}
}

// TestStaleClaimGetRace: the GET runs without the manager's lock (another
// claim prepares meanwhile) and with the holder's claim lock (the
// kubelet's unprepare or prepare of the holder waits for the release), and
// an entry that changed under the GET is not released.
func TestStaleClaimGetRace(t *testing.T) {
	// finished reports whether f, started now, finished within d.
	finished := func(f func(), d time.Duration) (<-chan struct{}, bool) {
		done := make(chan struct{})
		go func() { defer close(done); f() }()
		select {
		case <-done:
			return done, true
		case <-time.After(d):
			return done, false
		}
	}

	t.Run("unprepared during the GET", func(t *testing.T) {
		e := newEnv(t, "dgx-h100")
		api := e.withAPI()
		m, _ := e.start(nil)
		ctx := ctxFor(t)
		if _, err := m.Prepare(ctx, allocated("old", "gpu-7")); err != nil {
			t.Fatal(err)
		}
		var unprepared <-chan struct{}
		var unprepareErr error
		api.during = func() {
			api.during = nil
			// Another claim goes on: the GET is not under m.mu.
			if _, ok := finished(func() {
				if _, err := m.Prepare(ctx, allocated("other", "gpu-0")); err != nil {
					t.Errorf("other claim: %v", err)
				}
			}, 10*time.Second); !ok {
				t.Error("a prepare of another claim waited for the GET")
			}
			var ok bool
			unprepared, ok = finished(func() { unprepareErr = m.Unprepare(ctx, "uid-old", "default", "old") }, 50*time.Millisecond)
			if ok {
				t.Error("the holder was unprepared during the GET")
			}
		}
		if _, err := m.Prepare(ctx, allocated("new", "gpu-7")); err != nil {
			t.Fatalf("prepare: %v", err)
		}
		<-unprepared
		if unprepareErr != nil {
			t.Errorf("the kubelet's unprepare of the released claim: %v", unprepareErr)
		}
		if got := api.released(); !slices.Equal(got, []Evidence{EvidenceDeleted}) {
			t.Errorf("released %v", got)
		}
		got := m.Prepared()
		if _, ok := got["uid-old"]; ok || len(got) != 2 || e.hasSpec("uid-old") {
			t.Errorf("prepared %v, spec of the stale claim %v", slices.Sorted(maps.Keys(got)), e.hasSpec("uid-old"))
		}
	})

	t.Run("prepared again during the GET", func(t *testing.T) {
		// The kubelet's prepare of the holder, from a read before it was
		// deleted, waits for the release; then it and the new claim race
		// for the device, and exactly one of them gets it.
		e := newEnv(t, "dgx-h100")
		newClaim := allocated("new", "gpu-7")
		api := e.withAPI(newClaim.DeepCopy())
		m, _ := e.start(nil)
		ctx := ctxFor(t)
		old := allocated("old", "gpu-7")
		if _, err := m.Prepare(ctx, old); err != nil {
			t.Fatal(err)
		}
		var again <-chan struct{}
		var againErr error
		api.during = func() {
			api.during = nil
			var ok bool
			again, ok = finished(func() { _, againErr = m.Prepare(ctx, old) }, 50*time.Millisecond)
			if ok {
				t.Error("the holder was prepared again during the GET")
			}
		}
		_, newErr := m.Prepare(ctx, newClaim)
		<-again
		if got := api.released(); !slices.Equal(got, []Evidence{EvidenceDeleted}) {
			t.Errorf("released %v", got)
		}
		if (newErr == nil) == (againErr == nil) {
			t.Fatalf("new claim: %v, holder prepared again: %v; want exactly one prepared", newErr, againErr)
		}
		for _, err := range []error{newErr, againErr} {
			if err != nil && !errors.Is(err, ErrDeviceInUse) {
				t.Errorf("the refused one: %v, want ErrDeviceInUse", err)
			}
		}
		got := m.Prepared()
		if len(got) != 1 || len(e.specFiles()) != 1 {
			t.Errorf("prepared %v with specs %v, want one claim", slices.Sorted(maps.Keys(got)), e.specFiles())
		}
	})

	t.Run("entry replaced during the GET", func(t *testing.T) {
		// A failed save elsewhere restores the state from a copy: the
		// entry judged is not the one recorded, and is not released.
		e := newEnv(t, "dgx-h100")
		api := e.withAPI()
		m, _ := e.start(nil)
		ctx := ctxFor(t)
		if _, err := m.Prepare(ctx, allocated("old", "gpu-7")); err != nil {
			t.Fatal(err)
		}
		api.during = func() {
			m.mu.Lock()
			c := *m.cp.Claims["uid-old"]
			m.cp.Claims["uid-old"] = &c
			m.mu.Unlock()
		}
		if _, err := m.Prepare(ctx, allocated("new", "gpu-7")); !errors.Is(err, ErrDeviceInUse) {
			t.Fatalf("prepare: %v, want ErrDeviceInUse", err)
		}
		if gets := api.gets(t); gets != 1 {
			t.Errorf("%d GETs, want 1 (the prepare looks again once, without asking)", gets)
		}
		if _, ok := m.Prepared()["uid-old"]; !ok || !e.hasSpec("uid-old") || len(api.released()) != 0 {
			t.Errorf("holder released (entry %v, spec %v, released %v)", ok, e.hasSpec("uid-old"), api.released())
		}
		// The kubelet's retry asks again, about the entry as it is now.
		api.during = nil
		if _, err := m.Prepare(ctx, allocated("new", "gpu-7")); err != nil {
			t.Fatalf("retry: %v", err)
		}
	})
}
