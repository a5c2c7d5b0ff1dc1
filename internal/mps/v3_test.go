package mps

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/sim/standin"
)

// newV3Manager is newManager under Protocol3.
func newV3Manager(t *testing.T, root string) *Manager {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	m, err := New(Config{Root: root, Control: fakeControl(t), Logger: logger, Protocol: Protocol3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		list, _ := m.List(t.Context())
		for _, d := range list {
			_ = m.Stop(t.Context(), d.ID)
		}
	})
	return m
}

// TestV3Daemon: under MPS v3 a daemon starts with its config file (one
// server, tessera, over the claim's devices with the claim's limits), its
// own claim's containers use the server's default namespace, and each
// share gets a namespace of its own whose directory holds only its
// socket; a namespace is kept when asked again with the same limits and
// goes when deleted, and deleting what is not there is no error.
func TestV3Daemon(t *testing.T) {
	ctx := testCtx(t)
	root := t.TempDir()
	m := newV3Manager(t, root)
	spec := DaemonSpec{ID: "claim-a", Devices: []string{"GPU-a", "GPU-b"}, ActiveThreadPercentage: 40,
		PinnedMemoryLimits: map[string]int64{"GPU-a": 8 << 30, "GPU-b": 4<<30 + 123}}
	d := mustStart(t, ctx, m, spec)
	if !d.Namespaces || d.ClientDir != filepath.Join(d.PipeDir, "tessera", "default") {
		t.Fatalf("daemon %+v: want namespaces, containers in the default namespace", d)
	}
	st := status(t, d.PipeDir)
	srv, ok := st.Servers["tessera"]
	if st.Protocol != 3 || !ok {
		t.Fatalf("daemon runs protocol %d with servers %+v, want 3 with server tessera", st.Protocol, st.Servers)
	}
	// One limit per server: the smallest, rounded down to MiB.
	if !slices.Equal(srv.AllowedDevices, spec.Devices) || srv.String() != "pinned_memory_limit=4096M active_thread_percentage=40" {
		t.Errorf("server %+v (%s), want devices %v, 4096M, 40%%", srv, srv.String(), spec.Devices)
	}
	if slices.ContainsFunc(st.Commands, func(c string) bool { return strings.HasPrefix(c, "set_default") }) {
		t.Errorf("legacy settings sent to a v3 daemon: %q", st.Commands)
	}
	if _, err := os.Stat(filepath.Join(d.ClientDir, standin.ControlFIFO)); err != nil {
		t.Errorf("default namespace socket: %v", err)
	}

	share := NamespaceSpec{Name: "0b1c-share", ActiveThreadPercentage: 50, PinnedMemoryLimit: 7 << 30}
	for range 2 { // the second is a no-op
		dir, err := m.EnsureNamespace(ctx, spec.ID, share)
		if err != nil {
			t.Fatal(err)
		}
		if dir != filepath.Join(d.PipeDir, "tessera", share.Name) {
			t.Fatalf("namespace dir %s", dir)
		}
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) != 1 || entries[0].Name() != standin.ControlFIFO {
			t.Errorf("namespace dir holds %v (%v), want only its socket", entries, err)
		}
	}
	if got := status(t, d.PipeDir).Servers["tessera"].Namespaces[share.Name].String(); got != "pinned_memory_limit=7168M active_thread_percentage=50" {
		t.Errorf("namespace limits %s", got)
	}
	if _, err := m.EnsureNamespace(ctx, spec.ID, NamespaceSpec{Name: share.Name, PinnedMemoryLimit: 1 << 30}); err == nil {
		t.Error("a namespace asked again with other limits was accepted")
	}
	for _, bad := range []string{"default", "", "a/b", strings.Repeat("x", 64)} {
		if _, err := m.EnsureNamespace(ctx, spec.ID, NamespaceSpec{Name: bad}); err == nil {
			t.Errorf("namespace %q accepted", bad)
		}
	}
	for range 2 {
		if err := m.DeleteNamespace(ctx, spec.ID, share.Name); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := status(t, d.PipeDir).Servers["tessera"].Namespaces[share.Name]; ok {
		t.Error("namespace still there after delete")
	}
	if err := m.DeleteNamespace(ctx, "claim-none", share.Name); err != nil {
		t.Errorf("delete in a daemon that does not run: %v", err)
	}
	// A legacy manager has no namespaces to give.
	if _, err := newManager(t, t.TempDir()).EnsureNamespace(ctx, spec.ID, share); err == nil || !strings.Contains(err.Error(), "legacy MPS") {
		t.Errorf("legacy EnsureNamespace: %v", err)
	}
}
