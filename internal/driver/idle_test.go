package driver

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// idlePolls is how many polls an idle agent is watched for: each is a
// chance to publish again, so a hundred without a write is a hundred
// times the agent found nothing to send.
const idlePolls = 100

// quietPolls bounds the wait for a write that should not come after the
// ones a change should cost: the agent publishes within the poll that sees
// a change and the slice controller writes from its queue right after, so
// twenty more polls without a write leave nothing pending.
const quietPolls = 20

// TestIdleAgentWritesNothing: an agent with nothing to do sends the API
// server no writes, however often it polls its backend (every 10 ms here):
// over a hundred polls after its pool is published, it publishes nothing
// again.
func TestIdleAgentWritesNothing(t *testing.T) {
	for _, nd := range []node{{profile: "dgx-h100"}, {profile: "mi300x-8"}, {profile: "mixed-inference"},
		{profile: "dgx-h100", partitioning: publish.Dynamic, window: 2}} {
		t.Run(fmt.Sprint(nd.profile, "/", nd.partitioning, "/window=", nd.window), func(t *testing.T) {
			nd.poll = 10 * time.Millisecond
			n := launch(t, &nd)
			waitPublished(t, n)
			before := len(n.client.Actions())
			n.afterPolls(t, idlePolls)
			for _, a := range n.client.Actions()[before:] {
				if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
					t.Errorf("idle agent sent %s %s", v, a.GetResource().Resource)
				}
			}
		})
	}
}

// waitPublished waits until the fake API server holds the node's pool
// whole, as the agent's readiness asks it: every slice of the newest
// generation, with every device the agent publishes.
func waitPublished(t *testing.T, n *node) {
	t.Helper()
	want := len(n.driver.Published().Order)
	waitFor(t, func() bool {
		l, err := n.client.ResourceV1().ResourceSlices().List(n.ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		p := publish.Pools(l.Items, names.DriverName)["node-1"]
		return p != nil && p.Complete() && !p.CountsDiffer && p.Devices == want
	})
	if n.polls != nil {
		n.settle(t)
	}
}

// settle waits until the agent has nothing left to publish: quietPolls
// polls in a row without a slice write. A dynamic node's first publication
// is followed by the placement window's openings, each a republish of its
// own once the API server holds the last (Options.DeferOpen); a test that
// counts writes starts after them.
func (n *node) settle(t *testing.T) {
	t.Helper()
	for range 100 {
		before := len(n.client.Actions())
		n.afterPolls(t, quietPolls)
		if len(n.sliceWrites(before)) == 0 {
			return
		}
	}
	t.Fatalf("the agent still writes slices after %d polls", 100*quietPolls)
}

// expectWrites waits for the slice writes a change should cost, want of
// them since action since, then for quietPolls more polls, and reports
// what was written in all: exactly want, or the test fails.
func (n *node) expectWrites(t *testing.T, what string, since, want int) []string {
	t.Helper()
	waitFor(t, func() bool { return len(n.sliceWrites(since)) >= want })
	n.afterPolls(t, quietPolls)
	w := n.sliceWrites(since)
	if len(w) != want {
		t.Errorf("%s: %d slice writes %v, want %d", what, len(w), w, want)
	}
	return w
}

// TestRepublishAfterCarveIsOneUpdate: on a dynamic node, carving a claim's
// partition changes the hardware (the backend's generation); the agent
// re-reads it and rebuilds its slices, which costs one slice write (the
// GPU's placement slice, reordered by occupancy), and one when the
// partition goes.
func TestRepublishAfterCarveIsOneUpdate(t *testing.T) {
	n := launch(t, &node{profile: "dgx-h100", partitioning: publish.Dynamic, poll: 10 * time.Millisecond})
	waitPublished(t, n)
	claim := n.addClaim("slice", "gpu-7-mig-1g-10gb-5")
	before := len(n.client.Actions())
	if e := n.prepare(claim).Claims[claim.Uid].GetError(); e != "" {
		t.Fatal(e)
	}
	t.Logf("prepare: slice writes %v", n.expectWrites(t, "prepare", before, 1))
	before = len(n.client.Actions())
	if e := n.unprepare(claim).Claims[claim.Uid].GetError(); e != "" {
		t.Fatal(e)
	}
	t.Logf("unprepare: slice writes %v", n.expectWrites(t, "unprepare", before, 1))
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
		for _, v := range n.expectWrites(t, what, before, want) {
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
