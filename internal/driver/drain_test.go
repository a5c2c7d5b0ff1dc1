package driver

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// slowCarve holds every partition carve until let go, like a MIG create
// that takes its time.
type slowCarve struct {
	backend.Backend
	carving chan struct{} // receives once per carve that began
	release chan struct{} // closed to let carves finish
}

func (s *slowCarve) CreatePartition(ctx context.Context, gpu, profile string, p inventory.Placement) (*inventory.Partition, error) {
	s.carving <- struct{}{}
	<-s.release
	return s.Backend.CreatePartition(ctx, gpu, profile, p)
}

// TestStopDrainsCallsInFlight: an agent told to stop while a prepare is
// carving a slice lets that prepare finish (the kubelet gets its devices,
// the checkpoint says PrepareCompleted) before it unregisters, and refuses
// the calls that arrive meanwhile, saying why, instead of taking them on.
func TestStopDrainsCallsInFlight(t *testing.T) {
	s := &slowCarve{carving: make(chan struct{}, 1), release: make(chan struct{})}
	n := launch(t, &node{profile: "dgx-h100", partitioning: publish.Dynamic, wrap: func(b backend.Backend) backend.Backend {
		s.Backend = b
		return s
	}})
	claim := n.addClaim("slice", "gpu-7-mig-1g-10gb-5")
	late := n.addClaim("late", "gpu-6-mig-1g-10gb-5")
	dra := n.dra()
	type answer struct {
		resp *drapbv1.NodePrepareResourcesResponse
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		resp, err := dra.NodePrepareResources(n.ctx, &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{claim}})
		answered <- answer{resp, err}
	}()
	<-s.carving
	stopped := make(chan struct{})
	d := n.driver
	go func() {
		defer close(stopped)
		d.Stop()
	}()
	// Stop now refuses new calls; the carve is still held.
	waitFor(t, func() bool {
		_, err := d.PrepareResourceClaims(n.ctx, nil)
		return err != nil
	})
	if _, err := dra.NodePrepareResources(n.ctx, &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{late}}); err == nil || !strings.Contains(err.Error(), "stopping") {
		t.Errorf("kubelet call while stopping: %v, want it refused as stopping", err)
	}
	if _, err := d.UnprepareResourceClaims(n.ctx, nil); err == nil || !strings.Contains(err.Error(), "stopping") {
		t.Errorf("unprepare while stopping: %v, want it refused as stopping", err)
	}
	select {
	case <-stopped:
		t.Fatal("Stop returned with a prepare in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(s.release)
	a := <-answered
	<-stopped
	n.driver = nil // stopped already
	// The answer usually reaches the kubelet (Stop gives it drainFlush to
	// be written); the property is that the work does: the claim is
	// complete in the checkpoint, and the next agent answers the kubelet's
	// retry from it, without carving again.
	if a.err == nil {
		if r := a.resp.GetClaims()[claim.Uid]; r.GetError() != "" || len(r.GetDevices()) != 1 {
			t.Errorf("prepare in flight: %+v, want its one device", r)
		}
	} else if status.Code(a.err) != codes.Unavailable {
		t.Errorf("prepare in flight: %v, want its devices or the server gone", a.err)
	}
	if st := n.checkpointClaims()[claim.Uid]; st == nil || st.State != checkpoint.PrepareCompleted {
		t.Fatalf("checkpoint after the drain: %+v, want %s", st, checkpoint.PrepareCompleted)
	}
	if _, ok := n.checkpointClaims()[late.Uid]; ok {
		t.Errorf("a claim whose call came while stopping was taken on")
	}
	n.cancel()
	s.carving = make(chan struct{}, 8)
	n.start()
	resp := n.prepare(claim)
	if r := resp.GetClaims()[claim.Uid]; r.GetError() != "" || len(r.GetDevices()) != 1 {
		t.Errorf("the kubelet's retry on the next agent: %+v, want its one device", r)
	}
	if len(s.carving) != 0 {
		t.Errorf("the next agent carved %d partitions for a claim prepared before", len(s.carving))
	}
}

// TestInflightDrainTimeout: a call that does not finish within the drain's
// timeout is counted as left, and Stop goes on without it.
func TestInflightDrainTimeout(t *testing.T) {
	var f inflight
	if err := f.enter(); err != nil {
		t.Fatal(err)
	}
	if left := f.drain(20 * time.Millisecond); left != 1 {
		t.Errorf("drain left %d, want the 1 call still running", left)
	}
	if err := f.enter(); err == nil {
		t.Error("a call after the drain was admitted")
	}
	f.leave()
	if left := f.drain(time.Second); left != 0 {
		t.Errorf("second drain left %d, want 0", left)
	}
}
