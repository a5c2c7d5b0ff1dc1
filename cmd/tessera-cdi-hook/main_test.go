package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/tessera-gpu/tessera/internal/memlimit"
)

// The test binary is the hook when asked (underTest: run, or noop to
// measure what any hook's exec costs), so the tests and benchmarks run it
// as the runtime does: a process with the container's state on stdin.
const underTest = "TESSERA_HOOK_UNDER_TEST"

func TestMain(m *testing.M) {
	switch os.Getenv(underTest) {
	case "":
		os.Exit(m.Run())
	case "noop":
		os.Exit(0)
	default:
		procRoot = os.Getenv(underTest)
		main()
	}
}

const region = "nvidia/0000:84:00.0/vidmem"

// node is a simulated node for the hook: cgroup root with dmem, a /proc
// with containers' cgroup files, the hook's state directory.
type node struct {
	t              *testing.T
	hook           memlimit.Hook
	proc           string
	pods           map[int]string // pid: pod UID
	stdout, stderr bytes.Buffer
}

func newNode(t testing.TB) *node {
	d := t.TempDir()
	n := &node{hook: memlimit.Hook{Path: "/opt/tessera/bin/" + memlimit.HookName, CgroupRoot: filepath.Join(d, "cgroup"), StateDir: filepath.Join(d, "state"), Simulated: true}, proc: filepath.Join(d, "proc"), pods: map[int]string{}}
	mustWrite(t, filepath.Join(n.hook.CgroupRoot, "dmem.capacity"), region+" 24152899584\n")
	return n
}

func mustWrite(t testing.TB, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// container gives pid a cgroup of its own in its pod's, as runc does
// under a kubelet with the cgroupfs driver.
func (n *node) container(t testing.TB, pid int, pod, id string) {
	n.pods[pid] = pod
	mustWrite(t, filepath.Join(n.proc, fmt.Sprint(pid), "cgroup"), "0::/kubepods/besteffort/pod"+pod+"/"+id+"\n")
}

func share(uid string) memlimit.Limit {
	return memlimit.Limit{ClaimUID: uid, Claim: "team-a/share", Device: "gpu-3", Mechanism: memlimit.Dmem, Region: region, Bytes: 6 << 30}
}

// run runs the hook process with args (argv[0] first, as in the CDI spec)
// and the container's state on stdin.
func (n *node) run(t testing.TB, args []string, id string, pid int) (string, error) {
	st, err := json.Marshal(specs.State{Version: specs.Version, ID: id, Status: specs.StateCreating, Pid: pid, Bundle: "/run/bundle/" + id,
		Annotations: map[string]string{"io.kubernetes.cri.sandbox-uid": n.pods[pid]}})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], args[1:]...)
	cmd.Env = append(os.Environ(), underTest+"="+n.proc)
	cmd.Stdin = bytes.NewReader(st)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	return stderr.String(), err
}

// TestHookProcess: the hook as the runtime runs it. createRuntime sets the
// share's limit on the cgroup of the container's pod; a second pod's
// container of the claim exits 1 with the claim, device and holder on stderr (runc then fails the
// container); poststop releases it, after which the second is let through.
// Bad arguments and state fail with the reason.
func TestHookProcess(t *testing.T) {
	n := newNode(t)
	n.container(t, 100, "a", "ctr-1")
	n.container(t, 200, "b", "ctr-2")
	l := share("uid-1")
	if msg, err := n.run(t, n.hook.LimitArgs(l), "ctr-1", 100); err != nil {
		t.Fatalf("limit: %v: %s", err, msg)
	}
	got, err := memlimit.ReadDmemMax(filepath.Join(n.hook.CgroupRoot, "kubepods/besteffort/poda"), region)
	if err != nil || got != fmt.Sprint(6<<30) {
		t.Fatalf("dmem.max of %s: %q, %v; want %d", region, got, err, 6<<30)
	}
	msg, err := n.run(t, n.hook.LimitArgs(l), "ctr-2", 200)
	if err == nil {
		t.Fatal("a second container of the share was let through")
	}
	for _, want := range []string{memlimit.HookName + ": claim team-a/share (uid-1), device gpu-3, container ctr-2", "held by pod a (cgroup /kubepods/besteffort/poda, containers [ctr-1])"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q does not say %q", msg, want)
		}
	}
	if msg, err := n.run(t, n.hook.ReleaseArgs(), "ctr-1", 100); err != nil {
		t.Fatalf("release: %v: %s", err, msg)
	}
	if _, err := os.Stat(filepath.Join(n.hook.CgroupRoot, "kubepods/besteffort/poda")); !os.IsNotExist(err) {
		t.Errorf("released pod's simulated cgroup: %v", err)
	}
	if msg, err := n.run(t, n.hook.LimitArgs(l), "ctr-2", 200); err != nil {
		t.Fatalf("the second container after the first was released: %v: %s", err, msg)
	}

	// The agent's start-up check: it runs, needing nothing.
	if msg, err := n.run(t, []string{"hook", memlimit.CmdCheck}, "", 0); err != nil {
		t.Errorf("check: %v: %s", err, msg)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", []string{"hook"}, "a subcommand is needed"},
		{"unknown", []string{"hook", "lift"}, `unknown subcommand "lift"`},
		{"bad bytes", append(n.hook.LimitArgs(l)[:len(n.hook.LimitArgs(l))-1], "--bytes=12"), "--bytes 12 is not a positive whole number of MiB"},
		{"no state", n.hook.LimitArgs(share("uid-2")), "claim team-a/share (uid-2), device gpu-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, err := n.run(t, tc.args, "", 0)
			if err == nil || !strings.Contains(msg, tc.want) {
				t.Errorf("exit %v, stderr %q: want a failure saying %q", err, msg, tc.want)
			}
		})
	}
}

// BenchmarkHook is what the hook adds to a container's creation (limit,
// createRuntime) and deletion (release, poststop): the runtime runs it and
// waits, so its whole process is on the container's path. exec is the
// floor of any hook: the same binary started and exiting at once.
func BenchmarkHook(b *testing.B) {
	n := newNode(b)
	n.container(b, 100, "a", "ctr-1")
	l := share("uid-1")
	run := func(args []string) {
		if msg, err := n.run(b, args, "ctr-1", 100); err != nil {
			b.Fatalf("%v: %s", err, msg)
		}
	}
	b.Run("exec", func(b *testing.B) {
		for b.Loop() {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), underTest+"=noop")
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("limit", func(b *testing.B) {
		for b.Loop() {
			run(n.hook.LimitArgs(l))
			b.StopTimer()
			run(n.hook.ReleaseArgs())
			b.StartTimer()
		}
	})
	b.Run("release", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			run(n.hook.LimitArgs(l))
			b.StartTimer()
			run(n.hook.ReleaseArgs())
		}
	})
}
