package claims

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/nccltopo"
)

const ncclTopo = `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","topology":{"ncclTopoFile":true}}`

func (e *env) topoDir() string { return filepath.Join(e.cdiDir(), "k8s.gpu.tessera.dev-nccl-topo") }

// topoState is whether the claim's topology file is there, failing the
// test on a file that is not whole and valid, and on any other file in
// the directory (a temp file of a write cut short, another claim's).
func (e *env) topoState(uid string) bool {
	e.t.Helper()
	es, err := os.ReadDir(e.topoDir())
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	found := false
	for _, de := range es {
		if de.Name() != uid+".xml" {
			e.t.Errorf("topology directory holds %s", de.Name())
			continue
		}
		data, err := os.ReadFile(filepath.Join(e.topoDir(), de.Name()))
		if err != nil {
			e.t.Fatal(err)
		}
		if err := nccltopo.Check(data, nccltopo.NCCL); err != nil {
			e.t.Errorf("topology file of %s is not whole: %v", uid, err)
		}
		found = true
	}
	return found
}

// TestNCCLTopoCrashAtEveryStep stops the agent after each step of the
// prepare and the unprepare of a claim asking for an NCCL topology file,
// restarts it over the same disk, and has the kubelet retry: the file is
// there exactly when the claim is prepared (its spec on disk), and never
// partial.
func TestNCCLTopoCrashAtEveryStep(t *testing.T) {
	for _, step := range []crashStep{stepPrepareStarted, stepSpecWritten, stepPrepareCompleted} {
		t.Run("prepare/"+string(step), func(t *testing.T) {
			e := newEnv(t, "dgx-h100")
			m, _ := e.start(crashAt(step))
			ctx := ctxFor(t)
			claim := configured("c", ncclTopo, "gpu-2", "gpu-3", "gpu-5")
			if _, err := m.Prepare(ctx, claim); !errors.Is(err, errInjected) {
				t.Fatalf("prepare: %v, want injected stop", err)
			}
			m2, _ := e.start(nil)
			e.assertConsistent(m2, "uid-c")
			if got, want := e.topoState("uid-c"), e.hasSpec("uid-c"); got != want {
				t.Fatalf("after restart: topology file %v, spec %v", got, want)
			}
			if _, err := m2.Prepare(ctx, claim); err != nil {
				t.Fatalf("prepare after restart: %v", err)
			}
			if !e.topoState("uid-c") || !e.hasSpec("uid-c") || m2.Prepared()["uid-c"].State != checkpoint.PrepareCompleted {
				t.Fatalf("after retry: file %v spec %v entry %+v", e.topoState("uid-c"), e.hasSpec("uid-c"), m2.Prepared()["uid-c"])
			}
		})
	}
	for _, step := range []crashStep{stepUnprepareStarted, stepSpecRemoved, stepUnprepareFinished} {
		t.Run("unprepare/"+string(step), func(t *testing.T) {
			e := newEnv(t, "dgx-h100")
			m, _ := e.start(nil)
			ctx := ctxFor(t)
			claim := configured("c", ncclTopo, "gpu-2", "gpu-3", "gpu-5")
			if _, err := m.Prepare(ctx, claim); err != nil {
				t.Fatal(err)
			}
			if !e.topoState("uid-c") {
				t.Fatal("prepared claim has no topology file")
			}
			m.crashHook = crashAt(step)
			if err := m.Unprepare(ctx, "uid-c", "default", "c"); !errors.Is(err, errInjected) {
				t.Fatalf("unprepare: %v, want injected stop", err)
			}
			m2, _ := e.start(nil)
			// The file may outlive the spec only as long as the entry that
			// the retried unprepare finishes.
			if e.topoState("uid-c") && !e.hasSpec("uid-c") {
				if _, ok := m2.Prepared()["uid-c"]; !ok {
					t.Fatal("after restart: a topology file no entry owns")
				}
			}
			if err := m2.Unprepare(ctx, "uid-c", "default", "c"); err != nil {
				t.Fatalf("kubelet's retried unprepare: %v", err)
			}
			if e.topoState("uid-c") || e.hasSpec("uid-c") {
				t.Fatalf("after the retry: file %v, spec %v", e.topoState("uid-c"), e.hasSpec("uid-c"))
			}
		})
	}
}

// TestNCCLTopoOrphans: what a crash between the file and the spec leaves
// (a plain claim saves no entry before its spec), and the temp file of a
// write cut short, go at start; a prepared claim's file whose spec went in
// a reboot comes back with the spec when the kubelet prepares it again,
// and so does the file alone when it is gone.
func TestNCCLTopoOrphans(t *testing.T) {
	e := newEnv(t, "dgx-h100")
	m, _ := e.start(nil)
	ctx := ctxFor(t)
	claim := configured("c", ncclTopo, "gpu-0", "gpu-1")
	if _, err := m.Prepare(ctx, claim); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.topoDir(), "uid-gone.xml"), []byte("<system"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.topoDir(), ".uid-c.xml.123.tmp"), []byte("<sys"), 0o644); err != nil {
		t.Fatal(err)
	}
	m2, _ := e.start(nil)
	if !e.topoState("uid-c") { // and nothing else
		t.Fatal("prepared claim's file went at start")
	}
	// The spec and the file gone (a reboot clears /var/run/cdi).
	if err := os.RemoveAll(e.cdiDir()); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(e.cdiDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := m2.Prepare(ctx, claim); err != nil {
		t.Fatal(err)
	}
	if !e.hasSpec("uid-c") || !e.topoState("uid-c") {
		t.Fatal("prepare of a prepared claim did not rewrite its spec and file")
	}
	// The file alone gone.
	if err := os.Remove(filepath.Join(e.topoDir(), "uid-c.xml")); err != nil {
		t.Fatal(err)
	}
	if _, err := m2.Prepare(ctx, claim); err != nil {
		t.Fatal(err)
	}
	if !e.topoState("uid-c") {
		t.Fatal("prepare of a prepared claim did not rewrite its missing file")
	}
	// The checkpoint records the setting, so the file survives a restart
	// that rewrites from it; an old checkpoint without it loads as false.
	if c := e.start; c != nil {
		m3, _ := c(nil)
		for _, d := range m3.Prepared()["uid-c"].Devices {
			if !d.NCCLTopoFile {
				t.Fatalf("device %s lost ncclTopoFile in the checkpoint", d.Device)
			}
		}
	}
}
