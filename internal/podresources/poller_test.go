package podresources_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/podresources"
	"github.com/tessera-gpu/tessera/internal/podresources/podresourcestest"
	"github.com/tessera-gpu/tessera/internal/poll"
)

var (
	train = podresourcestest.Use{Namespace: "team-a", Pod: "train-0", Container: "trainer", ClaimNamespace: "team-a", Claim: "gpus",
		Driver: names.DriverName, Pool: "node-1", Device: "gpu-0"}
	// A second container of the same pod sharing the claim.
	sidecar = podresourcestest.Use{Namespace: "team-a", Pod: "train-0", Container: "profiler", ClaimNamespace: "team-a", Claim: "gpus",
		Driver: names.DriverName, Pool: "node-1", Device: "gpu-0"}
	share = podresourcestest.Use{Namespace: "team-b", Pod: "infer-0", Container: "server", ClaimNamespace: "team-b", Claim: "slice",
		Driver: names.DriverName, Pool: "node-1", Device: "gpu-1", ShareID: "6f1c"}
	// Another driver's device in the same pod, and a pod of another driver
	// only: neither is Tessera's to report.
	nic = podresourcestest.Use{Namespace: "team-a", Pod: "train-0", Container: "trainer", ClaimNamespace: "team-a", Claim: "nic",
		Driver: "sriov.example.com", Pool: "node-1", Device: "vf-3"}
	nvidia = podresourcestest.Use{Namespace: "team-c", Pod: "other", Container: "c", ClaimNamespace: "team-c", Claim: "g",
		Driver: "gpu.nvidia.com", Pool: "node-1", Device: "gpu-0"}
)

func alloc(u podresourcestest.Use) podresources.Allocation {
	return podresources.Allocation{Namespace: u.Namespace, Pod: u.Pod, Container: u.Container, ClaimNamespace: u.ClaimNamespace,
		Claim: u.Claim, Pool: u.Pool, Device: u.Device, ShareID: u.ShareID}
}

func TestListKeepsThisDriversDevices(t *testing.T) {
	srv := podresourcestest.Start(t)
	srv.Set(podresourcestest.Response(train, nic, sidecar, nvidia, share))
	got, err := podresources.List(context.Background(), srv.Socket, names.DriverName)
	if err != nil {
		t.Fatal(err)
	}
	want := []podresources.Allocation{alloc(train), alloc(sidecar), alloc(share)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("List\n%+v\nwant\n%+v", got, want)
	}
}

// A claim of several requests lists its last device twice (the
// whole-claim entry, internal/cdi/scope.go): it is one allocation.
func TestListCountsTheWholeClaimEntryOnce(t *testing.T) {
	srv := podresourcestest.Start(t)
	second := train
	second.Device = "gpu-1"
	srv.Set(podresourcestest.Response(train, second, second, share, share))
	got, err := podresources.List(context.Background(), srv.Socket, names.DriverName)
	if err != nil {
		t.Fatal(err)
	}
	want := []podresources.Allocation{alloc(train), alloc(second), alloc(share)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("List\n%+v\nwant\n%+v", got, want)
	}
}

func TestListNoSocket(t *testing.T) {
	_, err := podresources.List(context.Background(), t.TempDir()+"/kubelet.sock", names.DriverName)
	if err == nil {
		t.Fatal("List on a missing socket succeeded")
	}
}

// TestPollerReplacesTheSet: each poll is the kubelet's answer whole, so a
// pod that ended is gone at the next poll.
func TestPollerReplacesTheSet(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	srv := podresourcestest.Start(t)
	p := podresources.NewPoller(srv.Socket, names.DriverName, time.Hour, nil)
	if got := p.Current(); got != nil {
		t.Fatalf("before a poll: %v", got)
	}
	srv.Set(podresourcestest.Response(train, share))
	p.Poll(ctx)
	if got, want := p.Current(), []podresources.Allocation{alloc(train), alloc(share)}; !reflect.DeepEqual(got, want) {
		t.Fatalf("first poll\n%+v\nwant\n%+v", got, want)
	}
	srv.Set(podresourcestest.Response(share)) // train-0 ended
	p.Poll(ctx)
	if got, want := p.Current(), []podresources.Allocation{alloc(share)}; !reflect.DeepEqual(got, want) {
		t.Errorf("after train-0 ended\n%+v\nwant\n%+v", got, want)
	}
}

// TestPollerFailures: the last good set outlives KeepFailed failed polls
// (a kubelet restart), is dropped at the next, and comes back with the
// kubelet; every failure is counted.
func TestPollerFailures(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	srv := podresourcestest.Start(t)
	failed := 0
	p := podresources.NewPoller(srv.Socket, names.DriverName, 100*time.Millisecond, func() { failed++ })
	srv.Set(podresourcestest.Response(train))
	p.Poll(ctx)
	want := []podresources.Allocation{alloc(train)}
	srv.Stop()
	for i := 1; i <= poll.KeepFailed; i++ {
		p.Poll(ctx)
		if got := p.Current(); !reflect.DeepEqual(got, want) {
			t.Fatalf("after %d failed polls: %+v, want the last good set", i, got)
		}
	}
	p.Poll(ctx)
	if got := p.Current(); got != nil {
		t.Errorf("after %d failed polls: %+v, want none", poll.KeepFailed+1, got)
	}
	if failed != poll.KeepFailed+1 {
		t.Errorf("%d failures counted, want %d", failed, poll.KeepFailed+1)
	}
	srv.Restart(t)
	p.Poll(ctx)
	if got := p.Current(); !reflect.DeepEqual(got, want) {
		t.Errorf("kubelet back: %+v, want %+v", got, want)
	}
	if failed != poll.KeepFailed+1 {
		t.Errorf("a good poll counted as a failure: %d", failed)
	}
}

// TestPollerRun polls on its own until its context ends.
func TestPollerRun(t *testing.T) {
	_, tctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(tctx)
	srv := podresourcestest.Start(t)
	srv.Set(podresourcestest.Response(train))
	p := podresources.NewPoller(srv.Socket, names.DriverName, 10*time.Millisecond, nil)
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for srv.Lists() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if n := srv.Lists(); n < 3 {
		t.Errorf("%d polls in 10s at a 10ms interval", n)
	}
	if got := p.Current(); len(got) != 1 {
		t.Errorf("Current %+v", got)
	}
}
