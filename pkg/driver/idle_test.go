package driver

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/pkg/publish"
)

// TestIdleAgentWritesNothing: an agent with nothing to do sends the API
// server no writes, however often it polls its backend (every 10 ms here,
// a hundred polls a second) and publishes nothing again.
func TestIdleAgentWritesNothing(t *testing.T) {
	for _, profile := range []string{"dgx-h100", "mi300x-8", "mixed-inference"} {
		t.Run(profile, func(t *testing.T) {
			n := launch(t, &node{profile: profile, poll: 10 * time.Millisecond})
			waitPublished(t, n)
			before := len(n.client.Actions())
			time.Sleep(time.Second)
			for _, a := range n.client.Actions()[before:] {
				if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
					t.Errorf("idle agent sent %s %s", v, a.GetResource().Resource)
				}
			}
		})
	}
}

// waitPublished waits until every device is in the fake API server's
// slices and the slice controller has settled.
func waitPublished(t *testing.T, n *node) {
	t.Helper()
	want := len(n.driver.Published().Order)
	waitFor(t, func() bool {
		l, err := n.client.ResourceV1().ResourceSlices().List(n.ctx, metav1.ListOptions{})
		got := 0
		for _, s := range l.Items {
			got += len(s.Spec.Devices)
		}
		return err == nil && got == want
	})
	time.Sleep(300 * time.Millisecond)
}

// TestRepublishAfterCarveIsOneUpdate: on a dynamic node, carving a claim's
// partition changes the hardware (the backend's generation); the agent
// re-reads it and rebuilds its slices, which costs at most one slice write
// (the GPU's placement slice, reordered by occupancy), and as little when
// the partition goes, though MIG mode changes in a step of its own.
func TestRepublishAfterCarveIsOneUpdate(t *testing.T) {
	n := launch(t, &node{profile: "dgx-h100", partitioning: publish.Dynamic, poll: 10 * time.Millisecond})
	waitPublished(t, n)
	writes := func(since int) (out []string) {
		for _, a := range n.client.Actions()[since:] {
			if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" && a.GetResource().Resource == "resourceslices" {
				out = append(out, v)
			}
		}
		return out
	}
	claim := n.addClaim("slice", "gpu-7-mig-1g-10gb-5")
	before := len(n.client.Actions())
	if e := n.prepare(claim).Claims[claim.Uid].GetError(); e != "" {
		t.Fatal(e)
	}
	time.Sleep(time.Second) // many polls: the change is seen and published
	w := writes(before)
	if len(w) > 1 {
		t.Errorf("prepare cost %d slice writes: %v", len(w), w)
	}
	t.Logf("prepare: slice writes %v", w)
	before = len(n.client.Actions())
	if e := n.unprepare(claim).Claims[claim.Uid].GetError(); e != "" {
		t.Fatal(e)
	}
	time.Sleep(time.Second)
	if w := writes(before); len(w) > 1 {
		t.Errorf("unprepare cost %d slice writes: %v", len(w), w)
	}
}
