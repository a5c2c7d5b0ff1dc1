package memlimit

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// node is a fixture of what a hook sees: a /proc with containers' cgroup
// files and a cgroup root.
type node struct {
	t     *testing.T
	proc  string
	root  string
	state string
}

func newNode(t *testing.T) *node {
	t.Helper()
	d := t.TempDir()
	n := &node{t: t, proc: filepath.Join(d, "proc"), root: filepath.Join(d, "cgroup"), state: filepath.Join(d, "state")}
	for _, p := range []string{n.proc, n.root} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// process writes pid's /proc/<pid>/cgroup.
func (n *node) process(pid int, content string) {
	n.t.Helper()
	d := filepath.Join(n.proc, strconv.Itoa(pid))
	if err := os.MkdirAll(d, 0o755); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "cgroup"), []byte(content), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

// exit removes pid from /proc.
func (n *node) exit(pid int) {
	n.t.Helper()
	if err := os.RemoveAll(filepath.Join(n.proc, strconv.Itoa(pid))); err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) write(rel, content string) {
	n.t.Helper()
	p := filepath.Join(n.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) read(rel string) string {
	n.t.Helper()
	b, err := os.ReadFile(filepath.Join(n.root, rel))
	if err != nil {
		n.t.Fatal(err)
	}
	return string(b)
}

func (n *node) hook(simulated bool) Hook {
	return Hook{Path: "/opt/tessera/bin/tessera-cdi-hook", CgroupRoot: n.root, StateDir: n.state, Simulated: simulated}
}

func (n *node) env() Env { return Env{Proc: n.proc} }

func (n *node) records() []Record {
	n.t.Helper()
	r, err := Records(n.state)
	if err != nil {
		n.t.Fatal(err)
	}
	return r
}

// state is the OCI state of container id of pod (a UID), as containerd's
// CRI annotates it.
func state(id string, pid int, pod string) specs.State {
	return specs.State{ID: id, Pid: pid, Annotations: map[string]string{PodUIDAnnotations[0]: pod}}
}

// inPod is container id's cgroup in pod's, the kubelet's cgroupfs layout.
func inPod(pod, id string) string { return "/kubepods/besteffort/pod" + pod + "/" + id }

const region = "nvidia/0000:83:00.0/vidmem"

func share(claim, device string) Limit {
	return Limit{ClaimUID: claim, Claim: "tenant-a/gpu", Device: device, Mechanism: Dmem, Region: region, Bytes: 7 << 30}
}
