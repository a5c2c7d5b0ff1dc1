package driver

import (
	"errors"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// openGPUs are the GPUs whose placements the agent's last build published.
func openGPUs(d *Driver) []string { return slices.Sorted(maps.Keys(d.Published().Open)) }

// apiOpenGPUs are the GPUs with placements in the node's slices in the API
// server.
func (n *node) apiOpenGPUs() []string {
	n.t.Helper()
	l, err := n.client.ResourceV1().ResourceSlices().List(n.ctx, metav1.ListOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	open := map[string]bool{}
	for _, s := range l.Items {
		for _, d := range s.Spec.Devices {
			if gpu, _ := names.ParentGPU(d.Name); gpu != d.Name {
				open[gpu] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(open))
}

// waitOpen waits until the agent's last build opens GPUs ok accepts, and
// returns them.
func (n *node) waitOpen(what string, ok func([]string) bool) []string {
	n.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := openGPUs(n.driver)
		if ok(got) {
			return got
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("%s: open %v", what, got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitAPIOpen waits until the API server's slices open want.
func (n *node) waitAPIOpen(want []string) {
	n.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(n.apiOpenGPUs(), want) {
		if time.Now().After(deadline) {
			n.t.Fatalf("the API server's slices open %v, want %v", n.apiOpenGPUs(), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWindowFollowsClaims: a dynamic DGX H100 with a window of 2 publishes
// 58 devices. A claim holding an open GPU whole closes it at prepare and
// the next GPU opens; its release opens nothing (the window is full). A
// restarted agent opens what its slices in the API server opened, not a
// fresh window. A carve keeps its GPU open and opens one more.
func TestWindowFollowsClaims(t *testing.T) {
	n := launch(t, &node{profile: "dgx-h100", partitioning: publish.Dynamic, window: 2})
	res := n.driver.Published()
	if len(res.Order) != 8+2*25 {
		t.Fatalf("%d devices published, want 58", len(res.Order))
	}
	first := openGPUs(n.driver)
	n.waitAPIOpen(first)
	// The GPU first fit fills first is the one whose placements come first.
	var top string
	for _, name := range res.Order {
		if e := res.Devices[name]; e.Carve != nil {
			top, _ = names.ParentGPU(name)
			break
		}
	}
	w := n.addClaim("whole", top)
	if r := n.prepare(w); r.Claims["uid-whole"].GetError() != "" {
		t.Fatal(r.Claims["uid-whole"].GetError())
	}
	// Closed at once; the next GPU opens in a republish of its own.
	if got := openGPUs(n.driver); slices.Contains(got, top) {
		t.Fatalf("open %v after %s was prepared whole; want it closed", got, top)
	}
	held := n.waitOpen(top+" held whole", func(got []string) bool { return len(got) == 2 && !slices.Contains(got, top) })
	if _, ok := n.driver.Published().LeftOut[names.Partition(top, "mig", "1g.10gb", 0)]; !ok {
		t.Errorf("a placement of %s is not among those left out", top)
	}
	n.waitAPIOpen(held)
	if r := n.unprepare(w); r.Claims["uid-whole"].GetError() != "" {
		t.Fatal(r.Claims["uid-whole"].GetError())
	}
	if got := openGPUs(n.driver); !slices.Equal(got, held) {
		t.Errorf("open %v after the release, want %v (the window is full)", got, held)
	}

	// Restart: what the slices opened stays open; a fresh window would
	// open the released GPU again.
	n.stop()
	n.start()
	if got := openGPUs(n.driver); !slices.Equal(got, held) {
		t.Errorf("after a restart open %v, want %v as the slices published", got, held)
	}
	var gpus []publish.WindowGPU
	for _, g := range n.driver.Published().Window {
		g.WasOpen = false
		gpus = append(gpus, g)
	}
	if fresh := publish.OpenGPUs(gpus, 2); slices.Equal(slices.Sorted(maps.Keys(fresh)), held) {
		t.Errorf("a fresh window opens %v too: the restart proves nothing", held)
	}

	// A carve on an open GPU: it stays open, and the window opens another.
	var placement string
	for _, name := range n.driver.Published().Order {
		if e := n.driver.Published().Devices[name]; e.Carve != nil && e.Carve.Profile == "1g.10gb" {
			placement = name
			break
		}
	}
	if r := n.prepare(n.addClaim("small", placement)); r.Claims["uid-small"].GetError() != "" {
		t.Fatal(r.Claims["uid-small"].GetError())
	}
	gpu, _ := names.ParentGPU(placement)
	carved := n.waitOpen("a 1g.10gb on "+gpu, func(got []string) bool { return len(got) == 3 && slices.Contains(got, gpu) })
	n.waitAPIOpen(carved)

}

// TestWindowUnknownOpensAll: an agent that cannot read its node's slices
// cannot know which placements the scheduler may have allocated, so it
// publishes every GPU's, then closes a GPU once a claim holds it whole.
func TestWindowUnknownOpensAll(t *testing.T) {
	var failed atomic.Bool // the first list of slices only: the helper's own must work
	n := launch(t, &node{profile: "dgx-h100", partitioning: publish.Dynamic, window: 2,
		reactor: func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetVerb() == "list" && a.GetResource().Resource == "resourceslices" && failed.CompareAndSwap(false, true) {
				return true, nil, errors.New("injected")
			}
			return false, nil, nil
		}})
	if !failed.Load() {
		t.Fatal("the agent never listed its slices")
	}
	if got := len(n.driver.Published().Order); got != 8*26 {
		t.Fatalf("%d devices published, want all 208", got)
	}
	w := n.addClaim("whole", "gpu-0")
	if r := n.prepare(w); r.Claims["uid-whole"].GetError() != "" {
		t.Fatal(r.Claims["uid-whole"].GetError())
	}
	if got := openGPUs(n.driver); len(got) != 7 || slices.Contains(got, "gpu-0") {
		t.Errorf("open %v after gpu-0 was held whole, want the 7 others", got)
	}
}
