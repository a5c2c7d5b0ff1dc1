package driver

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/pkg/publish"
)

// TestIdleAgentWritesNothing: an agent with nothing to do sends the API
// server no writes, however often it polls its backend (every 10 ms here,
// a hundred polls a second) and publishes nothing again.
func TestIdleAgentWritesNothing(t *testing.T) {
	for _, nd := range []node{{profile: "dgx-h100"}, {profile: "mi300x-8"}, {profile: "mixed-inference"},
		{profile: "dgx-h100", partitioning: publish.Dynamic, window: 2}} {
		t.Run(fmt.Sprint(nd.profile, "/", nd.partitioning, "/window=", nd.window), func(t *testing.T) {
			nd.poll = 10 * time.Millisecond
			n := launch(t, &nd)
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

// sliceWrites are the slice writes the node's agent sent since action
// since, by verb.
func (n *node) sliceWrites(since int) (out []string) {
	for _, a := range n.client.Actions()[since:] {
		if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" && a.GetResource().Resource == "resourceslices" {
			out = append(out, v)
		}
	}
	return out
}

// TestWindowWritesOneSliceAGPU: with a window, a carve on an open GPU
// updates its slice, and the GPU the window then opens is an update of its
// own: two writes, no new generation (which would rewrite all ten slices).
// A claim holding an open GPU whole closes it (one update) and the window
// opens the next (one more); its release changes nothing, the window being
// full; destroying the partition leaves its GPU open (one update).
func TestWindowWritesOneSliceAGPU(t *testing.T) {
	n := launch(t, &node{profile: "dgx-h100", partitioning: publish.Dynamic, window: 2, poll: 10 * time.Millisecond})
	waitPublished(t, n)
	step := func(what string, want int, do func()) {
		t.Helper()
		before := len(n.client.Actions())
		do()
		time.Sleep(time.Second) // many polls: every change is seen and published
		w := n.sliceWrites(before)
		if len(w) != want {
			t.Errorf("%s: %d slice writes %v, want %d", what, len(w), w, want)
		}
		for _, v := range w {
			if v != "update" {
				t.Errorf("%s: a slice %s, want updates only", what, v)
			}
		}
	}
	first := func(profile string) string {
		res := n.driver.Published()
		for _, name := range res.Order {
			if e := res.Devices[name]; e.Carve != nil && e.Carve.Profile == profile && e.Partition == nil {
				return name
			}
		}
		t.Fatalf("no %s published", profile)
		return ""
	}
	small := n.addClaim("small", first("1g.10gb"))
	step("carve", 2, func() {
		if e := n.prepare(small).Claims[small.Uid].GetError(); e != "" {
			t.Fatal(e)
		}
	})
	// An open GPU without partitions: the window's last.
	res := n.driver.Published()
	var free string
	for _, g := range res.Window {
		if res.Open[g.Name] && !g.Touched {
			free = g.Name
		}
	}
	whole := n.addClaim("whole", free)
	step("hold "+free+" whole", 2, func() {
		if e := n.prepare(whole).Claims[whole.Uid].GetError(); e != "" {
			t.Fatal(e)
		}
	})
	step("release "+free, 0, func() {
		if e := n.unprepare(whole).Claims[whole.Uid].GetError(); e != "" {
			t.Fatal(e)
		}
	})
	step("destroy", 1, func() {
		if e := n.unprepare(small).Claims[small.Uid].GetError(); e != "" {
			t.Fatal(e)
		}
	})
}
