package localcluster

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A checkout deep in a home directory and a long node name must still give
// the kubelet and the plugin socket paths they can bind.
func TestRunDirSocketsBind(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	deep := filepath.Join(t.TempDir(), strings.Repeat("checkout-", 8), "_output", "e2e-cluster")
	c := &Config{Dir: deep}
	node := "gpu-h100-dynamic-with-a-rather-long-name"
	if direct := filepath.Join(c.NodeDir(node), longestSocket); len(direct) <= maxSocketPath {
		t.Fatalf("test setup: %s (%d bytes) would bind without a run dir", direct, len(direct))
	}
	if err := os.MkdirAll(c.NodeDir(node), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.makeRunDir(node); err != nil {
		t.Fatal(err)
	}
	for _, sock := range []string{filepath.Join(c.RunDir(node), longestSocket), c.criSocket(node)} {
		if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatalf("bind %s: %v", sock, err)
		}
		l.Close()
	}
	// The node dir's link reaches the same checkpoint path the tests read.
	if err := os.MkdirAll(c.PluginDataDir(node), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.CheckpointPath(node), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(c.NodeDir(node), "kubelet", "plugins", "gpu.tessera.dev", "checkpoint.json")); err != nil {
		t.Errorf("node dir link: %v", err)
	}
	if err := c.removeRunDir(node); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c.RunDir(node)); !os.IsNotExist(err) {
		t.Errorf("run dir after remove: %v", err)
	}
}

func TestRunDirDistinct(t *testing.T) {
	a, b := &Config{Dir: "/x/cluster"}, &Config{Dir: "/x/e2e-cluster"}
	seen := map[string]string{}
	for _, c := range []*Config{a, b} {
		for _, n := range []string{"gpu-h100", "gpu-h100-dynamic"} {
			d := c.RunDir(n)
			if prev, ok := seen[d]; ok {
				t.Errorf("%s and %s/%s share run dir %s", prev, c.Dir, n, d)
			}
			seen[d] = c.Dir + "/" + n
		}
	}
}

func TestRunDirRefusesLongTempDir(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("t", 80))
	t.Setenv("TMPDIR", long)
	c := &Config{Dir: t.TempDir()}
	err := c.makeRunDir("n")
	if err == nil || !strings.Contains(err.Error(), "TMPDIR") {
		t.Fatalf("err %v, want one naming TMPDIR", err)
	}
}
