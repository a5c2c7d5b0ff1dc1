package claims

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/tessera-gpu/tessera/internal/memlimit"
)

// limitNode is what the memory limit hook left on a node: a simulated
// cgroup tree with dmem, a /proc naming one container's cgroup, and the
// hook's state directory.
type limitNode struct {
	hook memlimit.Hook
	env  memlimit.Env
}

const limitRegion = "nvidia/0000:c6:00.0/vidmem"

func newLimitNode(t *testing.T) limitNode {
	t.Helper()
	d := t.TempDir()
	n := limitNode{
		hook: memlimit.Hook{Path: "/opt/tessera/bin/" + memlimit.HookName, CgroupRoot: filepath.Join(d, "cgroup"), StateDir: filepath.Join(d, "state"), Simulated: true},
		env:  memlimit.Env{Proc: filepath.Join(d, "proc")},
	}
	for p, content := range map[string]string{
		filepath.Join(n.hook.CgroupRoot, "dmem.capacity"): limitRegion + " 85899345920\n",
		filepath.Join(n.env.Proc, "100", "cgroup"):        "0::/kubepods/poda/ctr-1\n",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// hold sets, as the createRuntime hook does, the claim's limit on the
// cgroup of the container's pod.
func (n limitNode) hold(t *testing.T, uid, device string) {
	t.Helper()
	l := memlimit.Limit{ClaimUID: uid, Claim: "default/c", Device: device, Mechanism: memlimit.Dmem, Region: limitRegion, Bytes: 10 << 30}
	if err := memlimit.Apply(n.hook, l, specs.State{ID: "ctr-1", Pid: 100, Annotations: map[string]string{memlimit.PodUIDAnnotations[0]: "a"}}, n.env); err != nil {
		t.Fatal(err)
	}
}

func (n limitNode) records(t *testing.T) []memlimit.Record {
	t.Helper()
	recs, err := memlimit.Records(n.hook.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func (n limitNode) release(uid string) error { return memlimit.ReleaseClaim(n.hook, uid, n.env) }

// TestUnprepareReleasesMemoryLimits: a claim's limit whose poststop hook
// never ran (the runtime died with the container) goes when the claim is
// unprepared, whatever step the agent crashed at on the way: the kubelet's
// retried unprepare, or the restart's rollback, finishes it. Nothing is
// left, neither record nor simulated cgroup.
func TestUnprepareReleasesMemoryLimits(t *testing.T) {
	steps := []crashStep{"", stepUnprepareStarted, stepSpecRemoved, stepLimitsReleased, stepUnprepareFinished}
	for _, kind := range []string{"plain", "mps"} {
		for _, step := range steps {
			t.Run(kind+"/"+string(step), func(t *testing.T) {
				var e *env
				claim := allocated("c", "gpu-2")
				if kind == "mps" {
					// Holds side effects: unprepare saves its intent first.
					e = sharingEnv(t, "mixed-inference")
					claim = configured("c", mpsHalf, "gpu-0")
				} else {
					e = newEnv(t, "dgx-h100")
				}
				n := newLimitNode(t)
				e.releaseLimits = n.release
				m, _ := e.start(nil)
				ctx := ctxFor(t)
				if _, err := m.Prepare(ctx, claim); err != nil {
					t.Fatal(err)
				}
				n.hold(t, "uid-c", claim.Status.Allocation.Devices.Results[0].Device)
				n.hold(t, "uid-other", "gpu-5")
				if step != "" {
					m.crashHook = crashAt(step)
					if err := m.Unprepare(ctx, "uid-c", "default", "c"); !errors.Is(err, errInjected) {
						t.Fatalf("unprepare: %v, want injected stop", err)
					}
					m, _ = e.start(nil)
				}
				if err := m.Unprepare(ctx, "uid-c", "default", "c"); err != nil {
					t.Fatalf("unprepare: %v", err)
				}
				if _, ok := m.Prepared()["uid-c"]; ok {
					t.Fatal("claim still recorded")
				}
				if recs := n.records(t); len(recs) != 1 || recs[0].ClaimUID != "uid-other" {
					t.Errorf("records after unprepare: %+v, want the other claim's alone", recs)
				}
				if _, err := os.Stat(filepath.Join(n.hook.CgroupRoot, "kubepods", "poda")); !os.IsNotExist(err) {
					t.Errorf("the pod's simulated cgroup is still there: %v", err)
				}
			})
		}
	}
}

// TestUnprepareKeepsClaimWhenLimitsStay: a limit that cannot be released
// fails the unprepare, with the claim kept, so the kubelet's retry releases
// it; it is never forgotten with the limit held.
func TestUnprepareKeepsClaimWhenLimitsStay(t *testing.T) {
	e := newEnv(t, "dgx-h100")
	fail := errors.New("state directory not writable")
	calls := 0
	e.releaseLimits = func(uid string) error {
		calls++
		if calls == 1 {
			return fail
		}
		return nil
	}
	m, _ := e.start(nil)
	ctx := ctxFor(t)
	if _, err := m.Prepare(ctx, allocated("c", "gpu-2")); err != nil {
		t.Fatal(err)
	}
	err := m.Unprepare(ctx, "uid-c", "default", "c")
	if !errors.Is(err, fail) || !errors.Is(err, ErrSharing) {
		t.Fatalf("unprepare: %v, want the release's error (sharing)", err)
	}
	if _, ok := m.Prepared()["uid-c"]; !ok {
		t.Fatal("claim forgotten while its limit could not be released")
	}
	if err := m.Unprepare(ctx, "uid-c", "default", "c"); err != nil {
		t.Fatalf("retried unprepare: %v", err)
	}
	if _, ok := m.Prepared()["uid-c"]; ok || calls != 2 {
		t.Fatalf("after the retry: recorded %v, releases %d", ok, calls)
	}
}
