package memlimit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSimulatedShare: in the simulator's tree, a share's limit is set on
// the cgroup of its container's pod, so it holds the pod's every
// container; a sibling container naming the claim joins it; a container of
// a second pod is refused while a member of the first runs; the first pod
// released (its members gone without their poststop hooks), the second
// pod gets it; the last member's release removes the record and the tree.
func TestSimulatedShare(t *testing.T) {
	n := newNode(t)
	n.write("dmem.capacity", region+" 24152899584\n")
	h := n.hook(true)
	l := share("uid-1", "gpu-2")
	podA, podB := "/kubepods/besteffort/podaaa", "/kubepods/besteffort/podbbb"
	n.process(100, "9:memory:"+inPod("aaa", "ctr-1")+"\n")
	if err := Apply(h, l, state("ctr-1", 100, "aaa"), n.env()); err != nil {
		t.Fatal(err)
	}
	if got := n.read(podA + "/dmem.max"); got != region+" 7516192768\n" {
		t.Errorf("the pod's dmem.max = %q", got)
	}
	checkRecords(t, n, "uid-1.gpu-2.json", "aaa", podA, "ctr-1")
	// Run again for the same container (a retried create): the same limit.
	if err := Apply(h, l, state("ctr-1", 100, "aaa"), n.env()); err != nil {
		t.Fatalf("the hook run again for its container: %v", err)
	}
	checkRecords(t, n, "uid-1.gpu-2.json", "aaa", podA, "ctr-1")

	// A sibling of the same pod naming the claim shares the pod's limit.
	n.process(101, "9:memory:"+inPod("aaa", "ctr-1b")+"\n")
	if err := Apply(h, l, state("ctr-1b", 101, "aaa"), n.env()); err != nil {
		t.Fatalf("a sibling naming the claim: %v", err)
	}
	checkRecords(t, n, "uid-1.gpu-2.json", "aaa", podA, "ctr-1", "ctr-1b")

	// A container of a second pod, a member of the first running: refused.
	n.process(200, "9:memory:"+inPod("bbb", "ctr-2")+"\n")
	err := Apply(h, l, state("ctr-2", 200, "bbb"), n.env())
	var held *HeldError
	if !errors.As(err, &held) || held.By.Pod != "aaa" || !strings.Contains(err.Error(), "held by pod aaa") {
		t.Fatalf("second pod: %v, want it refused as held by pod aaa", err)
	}
	if _, err := os.Stat(filepath.Join(n.root, podB)); !os.IsNotExist(err) {
		t.Errorf("the refused pod got a cgroup in the tree: %v", err)
	}
	// Another device of the same claim is its own limit.
	if err := Apply(h, share("uid-1", "gpu-3"), state("ctr-2", 200, "bbb"), n.env()); err != nil {
		t.Fatalf("another device: %v", err)
	}

	// One member's poststop: the other still holds the pod's limit.
	if err := Release(h, "ctr-1", n.env()); err != nil {
		t.Fatal(err)
	}
	n.exit(100)
	checkRecords(t, n, "uid-1.gpu-2.json", "aaa", podA, "ctr-1b")
	if err := Apply(h, l, state("ctr-2", 200, "bbb"), n.env()); err == nil {
		t.Fatal("the second pod got the share while a member of the first runs")
	}
	// The last member goes without its poststop hook: the second pod takes
	// the device, and the first pod's cgroup goes.
	n.exit(101)
	if err := Apply(h, l, state("ctr-2", 200, "bbb"), n.env()); err != nil {
		t.Fatalf("after the holder died: %v", err)
	}
	if _, err := os.Stat(filepath.Join(n.root, podA)); !os.IsNotExist(err) {
		t.Errorf("the dead pod's simulated cgroup is still there: %v", err)
	}
	if got := n.read(podB + "/dmem.max"); got != region+" 7516192768\n" {
		t.Errorf("dmem.max = %q", got)
	}

	if err := Release(h, "ctr-2", n.env()); err != nil {
		t.Fatal(err)
	}
	if recs := n.records(); len(recs) != 0 {
		t.Errorf("records after release: %+v", recs)
	}
	if _, err := os.Stat(filepath.Join(n.root, podB)); !os.IsNotExist(err) {
		t.Errorf("simulated cgroup after release: %v", err)
	}
	// A second release (the other device's poststop hook) finds nothing.
	if err := Release(h, "ctr-2", n.env()); err != nil {
		t.Fatal(err)
	}
}

// checkRecords checks that the state holds a record in file of pod's
// limit on cgroup with these members.
func checkRecords(t *testing.T, n *node, file, pod, cgroup string, members ...string) {
	t.Helper()
	recs := n.records()
	i := slices.IndexFunc(recs, func(r Record) bool { return r.file == filepath.Join(n.state, file) })
	if i < 0 {
		t.Fatalf("records = %+v, none in %s", recs, file)
	}
	r := recs[i]
	var ids []string
	for _, m := range r.Members {
		ids = append(ids, m.Container)
	}
	if r.file != filepath.Join(n.state, file) || r.Pod != pod || r.Cgroup != cgroup || fmt.Sprint(ids) != fmt.Sprint(members) {
		t.Errorf("record %s: pod %s on %s, members %v; want %s: pod %s on %s, members %v", r.file, r.Pod, r.Cgroup, ids, file, pod, cgroup, members)
	}
}

// TestEachContainer: an MPS claim's pinned limit is each container's, and
// the pod's is their sum: a container of the pod without the device has
// no more than the claim's containers together. Two pods of the claim are
// each limited, neither refused.
func TestEachContainer(t *testing.T) {
	n := newNode(t)
	n.write("dmem.capacity", region+" 24152899584\n")
	h := n.hook(true)
	l := share("uid-1", "gpu-0")
	l.EachContainer = true
	for i, c := range []struct{ pod, id string }{{"aaa", "c1"}, {"aaa", "c2"}, {"bbb", "c3"}} {
		n.process(10+i, "9:memory:"+inPod(c.pod, c.id)+"\n")
		if err := Apply(h, l, state(c.id, 10+i, c.pod), n.env()); err != nil {
			t.Fatalf("container %s: %v", c.id, err)
		}
		if got := n.read(inPod(c.pod, c.id) + "/dmem.max"); got != region+" 7516192768\n" {
			t.Errorf("container %s: dmem.max = %q", c.id, got)
		}
	}
	for pod, want := range map[string]int64{"aaa": 2 * 7 << 30, "bbb": 7 << 30} {
		if got := n.read("kubepods/besteffort/pod" + pod + "/dmem.max"); got != fmt.Sprintf("%s %d\n", region, want) {
			t.Errorf("pod %s: dmem.max = %q, want %d", pod, got, want)
		}
	}
	if recs := n.records(); len(recs) != 2 || recs[0].file != filepath.Join(n.state, "uid-1.gpu-0.aaa.json") {
		t.Errorf("records = %+v, want one per pod", recs)
	}
	// A member's poststop lifts its own cgroup's limit, not the pod's.
	if err := Release(h, "c1", n.env()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(n.root, inPod("aaa", "c1"))); !os.IsNotExist(err) {
		t.Errorf("c1's simulated cgroup after its release: %v", err)
	}
	if _, err := os.Stat(filepath.Join(n.root, inPod("aaa", "c2"), "dmem.max")); err != nil {
		t.Errorf("c2's limit after c1's release: %v", err)
	}
	if err := ReleaseClaim(h, "uid-1", n.env()); err != nil {
		t.Fatal(err)
	}
	if recs := n.records(); len(recs) != 0 {
		t.Errorf("records after the claim's release: %+v", recs)
	}
	if _, err := os.Stat(filepath.Join(n.root, "kubepods")); err != nil {
		t.Fatal(err)
	}
	for _, pod := range []string{"aaa", "bbb"} {
		if _, err := os.Stat(filepath.Join(n.root, "kubepods/besteffort/pod"+pod)); !os.IsNotExist(err) {
			t.Errorf("pod %s's simulated cgroup after the claim's release: %v", pod, err)
		}
	}
}

// TestReleaseClaim: the agent's unprepare forgets a claim's records, and
// only that claim's.
func TestReleaseClaim(t *testing.T) {
	n := newNode(t)
	n.write("dmem.capacity", region+" 24152899584\n")
	h := n.hook(true)
	n.process(1, "0::"+inPod("a", "c1")+"\n")
	n.process(2, "0::"+inPod("b", "c2")+"\n")
	if err := Apply(h, share("uid-1", "gpu-0"), state("c1", 1, "a"), n.env()); err != nil {
		t.Fatal(err)
	}
	if err := Apply(h, share("uid-2", "gpu-0"), state("c2", 2, "b"), n.env()); err != nil {
		t.Fatal(err)
	}
	if err := ReleaseClaim(h, "uid-1", n.env()); err != nil {
		t.Fatal(err)
	}
	if recs := n.records(); len(recs) != 1 || recs[0].ClaimUID != "uid-2" {
		t.Errorf("records = %+v, want uid-2's alone", recs)
	}
	if _, err := os.Stat(filepath.Join(n.root, "kubepods/besteffort/poda")); !os.IsNotExist(err) {
		t.Errorf("uid-1's simulated cgroup: %v", err)
	}
}

// TestKernelPod: against a cgroup v2 tree as the kernel and a systemd
// kubelet lay it out, the hook delegates dmem down to the pod and writes
// its region's line there; without a dmem.max (the controller not
// enabled) the container fails and nothing is recorded. The pod holds the
// limit while its cgroup is there, its containers gone or not: a second
// pod is refused until the kubelet removed it.
func TestKernelPod(t *testing.T) {
	const (
		uid   = "5f0c-11"
		podCg = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod5f0c_11.slice"
		cg    = podCg + "/cri-containerd-1.scope"
	)
	n := newNode(t)
	n.write("cgroup.subtree_control", "cpu memory pids\n")
	n.write("kubepods.slice/cgroup.subtree_control", "cpu memory pids dmem\n")
	n.write("kubepods.slice/kubepods-burstable.slice/cgroup.subtree_control", "cpu memory\n")
	n.write(podCg[1:]+"/cgroup.subtree_control", "cpu memory\n")
	n.write(cg[1:]+"/cgroup.procs", "")
	n.process(7, "0::"+cg+"\n")
	h := n.hook(false)
	l := share("uid-1", "gpu-0")
	l.Region = "drm/0000:03:00.0/vram0"

	err := Apply(h, l, state("c1", 7, uid), n.env())
	if err == nil || !strings.Contains(err.Error(), "dmem.max does not exist") {
		t.Fatalf("no dmem.max: %v, want the controller named", err)
	}
	if recs := n.records(); len(recs) != 0 {
		t.Fatalf("a failed limit left records %+v", recs)
	}
	// The kernel would now show dmem.max; a written file stands for it.
	n.write(podCg[1:]+"/dmem.max", "")
	if err := Apply(h, l, state("c1", 7, uid), n.env()); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]string{
		"cgroup.subtree_control":                                         "+dmem", // written: it lacked dmem
		"kubepods.slice/cgroup.subtree_control":                          "cpu memory pids dmem\n",
		"kubepods.slice/kubepods-burstable.slice/cgroup.subtree_control": "+dmem",
		podCg[1:] + "/cgroup.subtree_control":                            "cpu memory\n", // the limit is the pod's: not delegated below it
		podCg[1:] + "/dmem.max":                                          "drm/0000:03:00.0/vram0 7516192768\n",
	} {
		if got := n.read(f); got != want {
			t.Errorf("%s = %q, want %q", f, got, want)
		}
	}
	// The container goes (runc removed its cgroup, then ran poststop): the
	// pod's cgroup, with the sandbox and any sibling in it, keeps the limit.
	n.exit(7)
	if err := os.RemoveAll(filepath.Join(n.root, cg[1:])); err != nil {
		t.Fatal(err)
	}
	if err := Release(h, "c1", n.env()); err != nil {
		t.Fatal(err)
	}
	if got := n.read(podCg[1:] + "/dmem.max"); got != "drm/0000:03:00.0/vram0 7516192768\n" {
		t.Errorf("the pod's dmem.max after its container's release = %q, want the limit kept", got)
	}
	const other = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod77_2.slice"
	n.write(other[1:]+"/c2/cgroup.procs", "")
	n.write(other[1:]+"/dmem.max", "")
	n.process(8, "0::"+other+"/c2\n")
	var held *HeldError
	if err := Apply(h, l, state("c2", 8, "77-2"), n.env()); !errors.As(err, &held) || held.By.Pod != uid {
		t.Fatalf("a second pod while the first pod's cgroup is there: %v, want it refused", err)
	}
	// The kubelet removes the pod's cgroup: the next attempt gets it.
	if err := os.RemoveAll(filepath.Join(n.root, podCg[1:])); err != nil {
		t.Fatal(err)
	}
	if err := Apply(h, l, state("c2", 8, "77-2"), n.env()); err != nil {
		t.Fatalf("once the first pod's cgroup is gone: %v", err)
	}
	// The claim's unprepare lifts what is still there.
	if err := ReleaseClaim(h, "uid-1", n.env()); err != nil {
		t.Fatal(err)
	}
	if got := n.read(other[1:] + "/dmem.max"); got != "drm/0000:03:00.0/vram0 max\n" {
		t.Errorf("dmem.max after the claim's release of a cgroup still there = %q, want the limit lifted", got)
	}

	// A container outside the root (another hierarchy) fails, naming it.
	n.process(9, "0::/elsewhere/podx/c3\n")
	if err := Apply(h, l, state("c3", 9, "x"), n.env()); err == nil || !strings.Contains(err.Error(), "/elsewhere/podx") {
		t.Errorf("a cgroup not under the root: %v", err)
	}
}
