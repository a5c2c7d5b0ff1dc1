package memlimit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const podA = "/kubepods/pod-a/ctr-1"

// TestSimulatedShare: in the simulator's tree, a share's container gets
// its cgroup with the limit, a second live container of the same claim
// device is refused, the holder's release removes both, and a holder that
// died without its poststop hook is replaced.
func TestSimulatedShare(t *testing.T) {
	n := newNode(t)
	n.write("dmem.capacity", region+" 24152899584\n")
	h := n.hook(true)
	l := share("uid-1", "gpu-2")
	n.process(100, "9:memory:"+podA+"\n")
	if err := Apply(h, l, state("ctr-1", 100), n.env()); err != nil {
		t.Fatal(err)
	}
	if got := n.read(podA + "/dmem.max"); got != region+" 7516192768\n" {
		t.Errorf("dmem.max = %q", got)
	}
	recs := n.records()
	if len(recs) != 1 || recs[0].Container != "ctr-1" || recs[0].Cgroup != podA || recs[0].Bytes != 7<<30 {
		t.Fatalf("records = %+v", recs)
	}
	// Run again for the same container (a retried create): the same limit.
	if err := Apply(h, l, state("ctr-1", 100), n.env()); err != nil {
		t.Fatalf("the hook run again for its container: %v", err)
	}

	// A second container of the claim, the first still running: refused.
	n.process(200, "9:memory:/kubepods/pod-b/ctr-2\n")
	err := Apply(h, l, state("ctr-2", 200), n.env())
	var held *HeldError
	if !errors.As(err, &held) || held.By.Container != "ctr-1" {
		t.Fatalf("second container: %v, want it refused as held by ctr-1", err)
	}
	if _, err := os.Stat(filepath.Join(n.root, "kubepods/pod-b/ctr-2")); !os.IsNotExist(err) {
		t.Errorf("the refused container got a cgroup in the tree: %v", err)
	}
	// Another device of the same claim is its own limit.
	if err := Apply(h, share("uid-1", "gpu-3"), state("ctr-2", 200), n.env()); err != nil {
		t.Fatalf("another device: %v", err)
	}

	// The first container goes without its poststop hook: the next one
	// takes the device, and the dead one's cgroup goes.
	n.exit(100)
	if err := Apply(h, l, state("ctr-2", 200), n.env()); err != nil {
		t.Fatalf("after the holder died: %v", err)
	}
	if _, err := os.Stat(filepath.Join(n.root, podA)); !os.IsNotExist(err) {
		t.Errorf("the dead holder's simulated cgroup is still there: %v", err)
	}
	if got := n.read("kubepods/pod-b/ctr-2/dmem.max"); got != region+" 7516192768\n" {
		t.Errorf("dmem.max = %q", got)
	}

	if err := Release(h, "ctr-2", n.env()); err != nil {
		t.Fatal(err)
	}
	if recs := n.records(); len(recs) != 0 {
		t.Errorf("records after release: %+v", recs)
	}
	if _, err := os.Stat(filepath.Join(n.root, "kubepods/pod-b/ctr-2")); !os.IsNotExist(err) {
		t.Errorf("simulated cgroup after release: %v", err)
	}
	// A second release (the other device's poststop hook) finds nothing.
	if err := Release(h, "ctr-2", n.env()); err != nil {
		t.Fatal(err)
	}
}

// TestReleaseClaim: the agent's unprepare forgets a claim's records, and
// only that claim's.
func TestReleaseClaim(t *testing.T) {
	n := newNode(t)
	n.write("dmem.capacity", region+" 24152899584\n")
	h := n.hook(true)
	n.process(1, "0::/a\n")
	n.process(2, "0::/b\n")
	if err := Apply(h, share("uid-1", "gpu-0"), state("c1", 1), n.env()); err != nil {
		t.Fatal(err)
	}
	if err := Apply(h, share("uid-2", "gpu-0"), state("c2", 2), n.env()); err != nil {
		t.Fatal(err)
	}
	if err := ReleaseClaim(h, "uid-1", n.env()); err != nil {
		t.Fatal(err)
	}
	if recs := n.records(); len(recs) != 1 || recs[0].ClaimUID != "uid-2" {
		t.Errorf("records = %+v, want uid-2's alone", recs)
	}
	if _, err := os.Stat(filepath.Join(n.root, "a")); !os.IsNotExist(err) {
		t.Errorf("uid-1's simulated cgroup: %v", err)
	}
}

// TestKernelDmem: against a cgroup v2 tree as the kernel lays it out, the
// hook delegates dmem down to the container and writes its region's line;
// without a dmem.max (the controller not enabled) the container fails and
// nothing is recorded.
func TestKernelDmem(t *testing.T) {
	const cg = "/kubepods.slice/pod1.slice/cri-containerd-1.scope"
	n := newNode(t)
	n.write("cgroup.subtree_control", "cpu memory pids\n")
	n.write("kubepods.slice/cgroup.subtree_control", "cpu memory pids dmem\n")
	n.write("kubepods.slice/pod1.slice/cgroup.subtree_control", "cpu memory\n")
	n.write(cg[1:]+"/cgroup.procs", "")
	n.process(7, "0::"+cg+"\n")
	h := n.hook(false)
	l := share("uid-1", "gpu-0")
	l.Region = "drm/0000:03:00.0/vram0"

	err := Apply(h, l, state("c1", 7), n.env())
	if err == nil || !strings.Contains(err.Error(), "dmem.max does not exist") {
		t.Fatalf("no dmem.max: %v, want the controller named", err)
	}
	if recs := n.records(); len(recs) != 0 {
		t.Fatalf("a failed limit left records %+v", recs)
	}
	// The kernel would now show dmem.max; a written file stands for it.
	n.write(cg[1:]+"/dmem.max", "")
	if err := Apply(h, l, state("c1", 7), n.env()); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]string{
		"cgroup.subtree_control":                           "+dmem", // written: it lacked dmem
		"kubepods.slice/cgroup.subtree_control":            "cpu memory pids dmem\n",
		"kubepods.slice/pod1.slice/cgroup.subtree_control": "+dmem",
		cg[1:] + "/dmem.max":                               "drm/0000:03:00.0/vram0 7516192768\n",
	} {
		if got := n.read(f); got != want {
			t.Errorf("%s = %q, want %q", f, got, want)
		}
	}
	if err := Release(h, "c1", n.env()); err != nil {
		t.Fatal(err)
	}
	if got := n.read(cg[1:] + "/dmem.max"); got != "drm/0000:03:00.0/vram0 max\n" {
		t.Errorf("dmem.max after release of a cgroup still there = %q, want the limit lifted", got)
	}

	// A container outside the root (another hierarchy) fails, naming it.
	n.process(8, "0::/elsewhere/c2\n")
	if err := Apply(h, l, state("c2", 8), n.env()); err == nil || !strings.Contains(err.Error(), "/elsewhere/c2") {
		t.Errorf("a cgroup not under the root: %v", err)
	}
}
