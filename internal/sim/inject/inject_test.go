package inject

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
)

func TestInject(t *testing.T) {
	dir := t.TempDir()
	m, err := sim.Profile("t4-2", "n1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.New(m, dir, sim.WithBootID("b")); err != nil {
		t.Fatal(err)
	}
	names, err := publish.GPUNames(&inventory.Node{GPUs: m.Node.GPUs})
	if err != nil {
		t.Fatal(err)
	}
	var gpu1 string
	for uuid, name := range names {
		if name == "gpu-1" {
			gpu1 = uuid
		}
	}
	tests := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"--device=gpu-1", "--ecc-sbe=3"}, 0, "recorded ecc-sbe (now 3) on gpu-1 (" + gpu1 + ")"},
		{[]string{"--device=" + gpu1, "--ecc-sbe=4"}, 0, "recorded ecc-sbe (now 7)"},
		{[]string{"--device=gpu-1", "--xid=79", "--message=off the bus"}, 0, `recorded XID 79 on gpu-1 (` + gpu1 + `) "off the bus"`},
		{[]string{"--device=gpu-1", "--clear"}, 0, "recorded recovered"},
		{[]string{"--device=gpu-1", "--ecc-sbe=1"}, 0, "recorded ecc-sbe (now 1)"},
		{[]string{"--device=gpu-7", "--lost"}, 1, `no GPU "gpu-7" on this node; it has gpu-0, gpu-1`},
		{[]string{"--device=gpu-1"}, 2, "give exactly one of"},
		{[]string{"--device=gpu-1", "--xid=79", "--lost"}, 2, "give exactly one of"},
		{[]string{"--xid=79"}, 2, "--state-dir and --device are required"},
	}
	for _, tc := range tests {
		var out, errb bytes.Buffer
		args := append([]string{"--state-dir=" + dir}, tc.args...)
		if tc.out == "--state-dir and --device are required" {
			args = tc.args
		}
		if code := Main(args, &out, &errb); code != tc.code {
			t.Errorf("%v: exit %d, want %d (%s%s)", tc.args, code, tc.code, out.String(), errb.String())
		}
		if got := out.String() + errb.String(); !strings.Contains(got, tc.out) {
			t.Errorf("%v: output %q lacks %q", tc.args, got, tc.out)
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, sim.HealthFile))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != 5 {
		t.Errorf("%d faults recorded, want 5:\n%s", n, data)
	}
}

func TestInjectNeedsAnAgentsState(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main([]string{"--state-dir=" + t.TempDir(), "--device=gpu-0", "--lost"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "has an agent run with --sim-state-dir") {
		t.Errorf("exit %d: %s", code, errb.String())
	}
}
