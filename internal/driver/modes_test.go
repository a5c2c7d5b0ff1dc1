package driver

import (
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
)

// waitPublished waits until the agent's last build satisfies ok.
func (n *node) waitPublished(what string, ok func(*publish.Result) bool) {
	n.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok(n.driver.Published()) {
		if time.Now().After(deadline) {
			n.t.Fatalf("%s: not published", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestModesFollowClaims: on a dynamic MI300X node the agent sets a GPU to
// CPX when a claim's CPX partition is prepared and republishes: the GPU's
// CPX partitions stay, its other modes' leave, its whole device says CPX.
// Once the claim is unprepared the GPU is back in SPX and every mode is
// published again. The slices and the hardware agree after each step.
func TestModesFollowClaims(t *testing.T) {
	n := launch(t, &node{profile: "mi300x-8", partitioning: publish.Dynamic,
		machine: func(m *sim.Machine) { m.ModeChangeTime = nil }})
	mode := func(res *publish.Result) string {
		return res.Devices["gpu-0"].GPU.Partitioning.Mode
	}
	published := func(res *publish.Result, d string) bool { _, ok := res.Devices[d]; return ok }
	if res := n.driver.Published(); mode(res) != "SPX" || !published(res, "gpu-0-xcp-dpx-0") || !published(res, "gpu-0-xcp-cpx-3") {
		t.Fatalf("idle node: gpu-0 in %s, DPX %v, CPX %v", mode(res), published(res, "gpu-0-xcp-dpx-0"), published(res, "gpu-0-xcp-cpx-3"))
	}
	c := n.addClaim("cpx", "gpu-0-xcp-cpx-3")
	if r := n.prepare(c); r.Claims["uid-cpx"].GetError() != "" {
		t.Fatal(r.Claims["uid-cpx"].GetError())
	}
	n.waitPublished("gpu-0 in CPX", func(res *publish.Result) bool {
		return mode(res) == "CPX" && published(res, "gpu-0-xcp-cpx-3") && published(res, "gpu-0-xcp-cpx-7") &&
			!published(res, "gpu-0-xcp-dpx-0") && published(res, "gpu-1-xcp-dpx-0")
	})
	if r := n.unprepare(c); r.Claims["uid-cpx"].GetError() != "" {
		t.Fatal(r.Claims["uid-cpx"].GetError())
	}
	n.waitPublished("gpu-0 back in SPX", func(res *publish.Result) bool {
		return mode(res) == "SPX" && published(res, "gpu-0-xcp-dpx-0") && published(res, "gpu-0-xcp-qpx-2")
	})
}
