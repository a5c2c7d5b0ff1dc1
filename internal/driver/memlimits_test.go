package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/tessera-gpu/tessera/internal/isolation"
	"github.com/tessera-gpu/tessera/internal/memlimit"
	"github.com/tessera-gpu/tessera/internal/metrics"
	"github.com/tessera-gpu/tessera/internal/metrics/metricstest"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// host is what the agent finds on the node: nothing (the zero Host) unless
// the test installs a hook, then the simulator's cgroup tree with it.
func (n *node) host() isolation.Host {
	if !n.limitHook {
		return isolation.Host{}
	}
	n.t.Helper()
	root := n.backend.CgroupRoot()
	h, err := isolation.ReadHost(root)
	if err != nil {
		n.t.Fatal(err)
	}
	path := filepath.Join(n.dir, "bin", memlimit.HookName)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\n[ \"$1\" = check ]\n"), 0o755); err != nil {
		n.t.Fatal(err)
	}
	if err := h.FindHook(memlimit.Hook{Path: path, CgroupRoot: root, StateDir: filepath.Join(n.dir, "limits"), Simulated: true}); err != nil {
		n.t.Fatal(err)
	}
	return h
}

// TestKernelShare: on the R615 L4 node with the hook installed, a share's
// CDI spec, as the CDI library resolves it for a container, runs the hook
// at createRuntime with the share's limit and at poststop; run as the
// runtime would, the hook holds the container's cgroup (the simulator's
// tree) at the share's memory. The claim says so, naming the value and the
// mechanism, and the metrics count the shares as kernel-held.
func TestKernelShare(t *testing.T) {
	n := launch(t, &node{profile: "l4-4-r615", sharing: publish.SharingCapacity, mps: true, limitHook: true, metrics: metrics.New()})
	gpu := n.driver.Published().Devices["gpu-0"].GPU
	region := fmt.Sprintf("nvidia/%s/vidmem", gpu.PCIBusID)
	claims := map[string]int64{"a": 7 << 30, "b": 5<<30 + 1} // b's limit rounds down to 5GiB
	var refs []*drapbv1.Claim
	for _, name := range []string{"a", "b"} {
		refs = append(refs, n.addShareClaim(name, "gpu-0", fmt.Sprint(claims[name])))
	}
	resp := n.prepare(refs...)
	proc := t.TempDir()
	for i, c := range refs {
		r := resp.Claims[c.Uid]
		if r.GetError() != "" {
			t.Fatalf("prepare %s: %s", c.Name, r.GetError())
		}
		oci := resolve(t, n.cdiDir(), r.Devices[0].CdiDeviceIds)
		if oci.Hooks == nil || len(oci.Hooks.CreateRuntime) != 1 || len(oci.Hooks.Poststop) != 1 {
			t.Fatalf("claim %s: hooks %+v, want one createRuntime and one poststop hook", c.Name, oci.Hooks)
		}
		create := oci.Hooks.CreateRuntime[0]
		if create.Path != n.driver.opts.Host.Hook.Path || create.Timeout == nil {
			t.Errorf("claim %s: createRuntime hook %+v", c.Name, create)
		}
		h, l, err := memlimit.Parse(create.Args[1], create.Args[2:])
		if err != nil {
			t.Fatalf("claim %s: the spec's hook arguments: %v", c.Name, err)
		}
		want := memlimit.Limit{ClaimUID: c.Uid, Claim: "default/" + c.Name, Device: "gpu-0", Mechanism: memlimit.Dmem, Region: region, Bytes: claims[c.Name] &^ (1<<20 - 1)}
		if l != want {
			t.Errorf("claim %s: limit %+v, want %+v", c.Name, l, want)
		}
		if !h.Simulated || h.CgroupRoot != n.backend.CgroupRoot() {
			t.Errorf("claim %s: hook %+v, want the simulator's tree", c.Name, h)
		}
		if got := oci.Hooks.Poststop[0].Args[1]; got != memlimit.CmdRelease {
			t.Errorf("claim %s: poststop hook runs %q", c.Name, got)
		}

		// The runtime runs it for the container, its process in a cgroup
		// of its own in its pod's.
		podCg := "/kubepods/pod" + c.Name
		cg := podCg + "/ctr"
		pid := 100 + i
		if err := os.MkdirAll(filepath.Join(proc, fmt.Sprint(pid)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, fmt.Sprint(pid), "cgroup"), []byte("0::"+cg+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := memlimit.Apply(h, l, specs.State{ID: "ctr-" + c.Name, Pid: pid, Annotations: map[string]string{memlimit.PodUIDAnnotations[0]: c.Name}}, memlimit.Env{Proc: proc}); err != nil {
			t.Fatal(err)
		}
		got, err := memlimit.ReadDmemMax(filepath.Join(h.CgroupRoot, podCg), region)
		if err != nil || got != fmt.Sprint(want.Bytes) {
			t.Errorf("claim %s: dmem.max of %s holds %s (%v), want %d", c.Name, region, got, err, want.Bytes)
		}

		st, reason, msg := shareStatus(t, n, c.Name)
		if st != metav1.ConditionTrue || reason != ReasonKernelMemoryLimit || !strings.Contains(msg, fmt.Sprintf("at most %dMiB of %s", want.Bytes>>20, region)) ||
			!strings.Contains(msg, "dmem") || !strings.Contains(msg, "MPS v3 namespace") {
			t.Errorf("claim %s: ShareEnforced %s %s %q", c.Name, st, reason, msg)
		}
	}
	s := metricstest.Scrape(t, n.metrics.Handler())
	expect(t, "shares held by the kernel", s.Value("tessera_prepared_shares", "memory_isolation", "kernel"), 2)

	// A whole GPU has no limit to set: its spec runs no hook.
	whole := n.addShareClaim("whole", "gpu-1", "23034Mi")
	r := n.prepare(whole).Claims[whole.Uid]
	if oci := resolve(t, n.cdiDir(), r.Devices[0].CdiDeviceIds); oci.Hooks != nil && len(oci.Hooks.CreateRuntime) > 0 {
		t.Errorf("a whole GPU's spec runs hooks %+v", oci.Hooks)
	}
}

// TestKernelMPSClaim: an MPS claim owns its GPU, and its pinned memory
// limit is per client, as MPS applies it: the hook limits each of the
// claim's containers on its own (demo 11 runs two), refusing none.
func TestKernelMPSClaim(t *testing.T) {
	n := launch(t, &node{profile: "l4-4-r615", mps: true, limitHook: true})
	gpu := n.driver.Published().Devices["gpu-1"].GPU
	region := fmt.Sprintf("nvidia/%s/vidmem", gpu.PCIBusID)
	c := n.addConfiguredClaim("mps", `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"defaultPinnedDeviceMemoryLimit":"10Gi"}}}`, "gpu-1")
	r := n.prepare(c).Claims[c.Uid]
	if r.GetError() != "" {
		t.Fatalf("prepare: %s", r.GetError())
	}
	oci := resolve(t, n.cdiDir(), r.Devices[0].CdiDeviceIds)
	if oci.Hooks == nil || len(oci.Hooks.CreateRuntime) != 1 {
		t.Fatalf("hooks %+v, want the memory limit hook", oci.Hooks)
	}
	h, l, err := memlimit.Parse(oci.Hooks.CreateRuntime[0].Args[1], oci.Hooks.CreateRuntime[0].Args[2:])
	if err != nil {
		t.Fatal(err)
	}
	if !l.EachContainer || l.Bytes != 10<<30 || l.Region != region {
		t.Fatalf("limit %+v: want 10GiB of %s for each container", l, region)
	}
	proc := t.TempDir()
	for i, ctr := range []string{"a", "b"} {
		pid := 100 + i
		cg := "/kubepods/podx/ctr-" + ctr
		if err := os.MkdirAll(filepath.Join(proc, fmt.Sprint(pid)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, fmt.Sprint(pid), "cgroup"), []byte("0::"+cg+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := memlimit.Apply(h, l, specs.State{ID: "ctr-" + ctr, Pid: pid, Annotations: map[string]string{memlimit.PodUIDAnnotations[0]: "x"}}, memlimit.Env{Proc: proc}); err != nil {
			t.Fatalf("container %s: %v", ctr, err)
		}
		if got, err := memlimit.ReadDmemMax(filepath.Join(h.CgroupRoot, cg), region); err != nil || got != fmt.Sprint(10<<30) {
			t.Errorf("container %s: dmem.max %s (%v)", ctr, got, err)
		}
	}
	// The pod's limit is the sum of its containers': a third container of
	// the pod, handed the device, has no more than they.
	if got, err := memlimit.ReadDmemMax(filepath.Join(h.CgroupRoot, "kubepods/podx"), region); err != nil || got != fmt.Sprint(20<<30) {
		t.Errorf("pod: dmem.max %s (%v), want both containers' limits", got, err)
	}
	recs, err := memlimit.Records(h.StateDir)
	if err != nil || len(recs) != 1 || len(recs[0].Members) != 2 {
		t.Fatalf("records %+v (%v), want the pod's, of both containers", recs, err)
	}
	// The claim's unprepare releases both (no poststop ran here).
	if resp := n.unprepare(c); resp.Claims[c.Uid].GetError() != "" {
		t.Fatalf("unprepare: %s", resp.Claims[c.Uid].GetError())
	}
	if recs, _ := memlimit.Records(h.StateDir); len(recs) != 0 {
		t.Errorf("records after unprepare: %+v", recs)
	}
}
