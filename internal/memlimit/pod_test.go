package memlimit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestPodOf: the pod's cgroup is the container's parent where the kubelet
// named it after the pod the runtime's annotations name, in both drivers'
// layouts and both runtimes' annotations; anything else fails, naming why.
func TestPodOf(t *testing.T) {
	const uid = "0b9e8f4c-1d2a-4e6f-9a7b-3c5d7e9f1a2b"
	for _, tc := range []struct {
		name, annotation, uid, cg, want, err string
	}{
		{name: "containerd, cgroupfs", annotation: PodUIDAnnotations[0], uid: uid,
			cg: "/kubepods/burstable/pod" + uid + "/4f1e", want: "/kubepods/burstable/pod" + uid},
		{name: "containerd, systemd", annotation: PodUIDAnnotations[0], uid: uid,
			cg:   "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/cri-containerd-4f1e.scope",
			want: "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"},
		{name: "CRI-O, guaranteed", annotation: PodUIDAnnotations[1], uid: uid,
			cg:   "/kubepods.slice/kubepods-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/crio-4f1e.scope",
			want: "/kubepods.slice/kubepods-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"},
		{name: "a kubelet root of its own", annotation: PodUIDAnnotations[0], uid: uid,
			cg: "/tessera-1a2b/kubepods/besteffort/pod" + uid + "/4f1e", want: "/tessera-1a2b/kubepods/besteffort/pod" + uid},
		{name: "no annotation", cg: "/kubepods/burstable/pod" + uid + "/4f1e", err: "names no pod"},
		{name: "cgroupsPerQOS off", annotation: PodUIDAnnotations[0], uid: uid, cg: "/k8s.io/4f1e", err: "not in a cgroup of its pod " + uid},
		{name: "another pod's cgroup", annotation: PodUIDAnnotations[0], uid: uid, cg: "/kubepods/burstable/pod1234/4f1e", err: "not in a cgroup of its pod"},
		{name: "the root", annotation: PodUIDAnnotations[0], uid: "x", cg: "/podx", err: "not in a cgroup of its pod"},
		{name: "a UID with a slash", annotation: PodUIDAnnotations[0], uid: "../x", cg: "/kubepods/pod../x/c", err: "pod UID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := specs.State{ID: "4f1e", Pid: 1}
			if tc.annotation != "" {
				st.Annotations = map[string]string{tc.annotation: tc.uid}
			}
			p, err := podOf(st, tc.cg)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("podOf = %+v, %v; want an error saying %q", p, err, tc.err)
				}
				return
			}
			if err != nil || p.UID != tc.uid || p.Cgroup != tc.want {
				t.Errorf("podOf = %+v, %v; want pod %s in %s", p, err, tc.uid, tc.want)
			}
		})
	}
}

// TestLegacyRecord: a record an earlier hook wrote (the limit on one
// container's cgroup) survives the upgrade: it holds the claim device
// while its container runs, and its container's poststop releases it.
func TestLegacyRecord(t *testing.T) {
	n := newNode(t)
	n.write("dmem.capacity", region+" 24152899584\n")
	n.write("k8s.io/old/dmem.max", region+" 7516192768\n")
	h := n.hook(true)
	if err := os.MkdirAll(n.state, 0o755); err != nil {
		t.Fatal(err)
	}
	legacy := `{"ClaimUID":"uid-1","Claim":"tenant-a/gpu","Device":"gpu-2","Mechanism":"dmem","Region":"` + region + `","GPU":"","Bytes":7516192768,"container":"old","pid":50,"cgroup":"/k8s.io/old"}`
	if err := os.WriteFile(filepath.Join(n.state, "uid-1.gpu-2.json"), []byte(legacy), 0o644); err != nil {
		t.Fatal(err)
	}
	n.process(50, "9:memory:/k8s.io/old\n")
	n.process(60, "9:memory:"+inPod("new", "c")+"\n")
	l := share("uid-1", "gpu-2")
	if err := Apply(h, l, state("c", 60, "new"), n.env()); err == nil || !strings.Contains(err.Error(), "containers [old]") {
		t.Fatalf("a pod while the earlier hook's container runs: %v, want it refused naming it", err)
	}
	if err := Release(h, "old", n.env()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(n.root, "k8s.io/old")); !os.IsNotExist(err) {
		t.Errorf("the old container's simulated cgroup after its release: %v", err)
	}
	if err := Apply(h, l, state("c", 60, "new"), n.env()); err != nil {
		t.Fatalf("after the old container's release: %v", err)
	}
	checkRecords(t, n, "uid-1.gpu-2.json", "new", "/kubepods/besteffort/podnew", "c")
}
