package inject

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/imex"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
	"github.com/tessera-gpu/tessera/internal/sim/imexstandin"
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

// TestInjectIMEX: --imex-fail writes the fault file beside the daemon's
// config, which the stand-in reads; --imex-clear removes it.
func TestInjectIMEX(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "config.cfg")
	if err := os.WriteFile(config, []byte("SERVER_PORT=50000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fault := imexstandin.FaultFile(config)
	tests := []struct {
		args  []string
		code  int
		out   string
		fault string // the fault file's text; "-" for none
	}{
		{[]string{"--imex-config=" + config, "--imex-fail", "--message=NVLink down"}, 0, `recorded an IMEX fault "NVLink down" for the daemon of ` + config, "NVLink down\n"},
		{[]string{"--imex-config=" + config, "--imex-clear"}, 0, "cleared the IMEX fault of the daemon of " + config, "-"},
		{[]string{"--imex-config=" + config, "--imex-clear"}, 0, "cleared", "-"},
		{[]string{"--imex-config=" + config, "--imex-fail"}, 0, "recorded an IMEX fault for", "\n"},
		{[]string{"--imex-config=" + filepath.Join(dir, "typo.cfg"), "--imex-clear"}, 1, "no IMEX config file", "\n"},
		{[]string{"--imex-config=" + config}, 2, "give exactly one of --imex-fail, --imex-clear", "\n"},
		{[]string{"--imex-config=" + config, "--imex-fail", "--imex-clear"}, 2, "give exactly one", "\n"},
		{[]string{"--imex-fail"}, 2, "--imex-config is required", "\n"},
		{[]string{"--imex-config=" + config, "--imex-clear", "--message=x"}, 2, "--message goes with --imex-fail", "\n"},
		{[]string{"--imex-config=" + config, "--imex-fail", "--device=gpu-0", "--state-dir=" + dir}, 2, "[--device --state-dir] are a GPU's", "\n"},
	}
	for _, tc := range tests {
		var out, errb bytes.Buffer
		if code := Main(tc.args, &out, &errb); code != tc.code {
			t.Errorf("%v: exit %d, want %d (%s%s)", tc.args, code, tc.code, out.String(), errb.String())
		}
		if got := out.String() + errb.String(); !strings.Contains(got, tc.out) {
			t.Errorf("%v: output %q lacks %q", tc.args, got, tc.out)
		}
		data, err := os.ReadFile(fault)
		if got := string(data); (tc.fault == "-") != os.IsNotExist(err) || (tc.fault != "-" && got != tc.fault) {
			t.Errorf("%v: fault file %q (%v), want %q", tc.args, got, err, tc.fault)
		}
	}
}

// TestInjectIMEXFailsTheDaemon: what --imex-fail writes, a running
// stand-in daemon reports, and --imex-clear makes it READY again.
func TestInjectIMEXFailsTheDaemon(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	c := imex.DefaultConfig()
	c.ServerPort, c.NodesFile, c.CmdUnixSocket = port, filepath.Join(dir, "nodes.cfg"), filepath.Join(dir, "imex.sock")
	config := filepath.Join(dir, "config.cfg")
	if err := os.WriteFile(c.NodesFile, []byte("127.0.0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(config, c.Render(), 0o644); err != nil {
		t.Fatal(err)
	}
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- (&imexstandin.Daemon{ConfigFile: config, FaultPoll: 5 * time.Millisecond}).Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	for _, step := range []struct {
		flag, want string
	}{{"", imex.ReadyStatus}, {"--imex-fail", "NOT_READY: injected fault: lost"}, {"--imex-clear", imex.ReadyStatus}} {
		if step.flag != "" {
			args := []string{"--imex-config=" + config, step.flag}
			if step.flag == "--imex-fail" {
				args = append(args, "--message=lost")
			}
			var out, errb bytes.Buffer
			if code := Main(args, &out, &errb); code != 0 {
				t.Fatalf("%v: exit %d: %s", args, code, errb.String())
			}
		}
		waitIMEX(t, c.CmdUnixSocket, step.want)
	}
}

// waitIMEX polls the daemon of socket until its status is want.
func waitIMEX(t *testing.T, socket, want string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		got, err := imexstandin.Query(t.Context(), socket)
		if err == nil && got == want {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("IMEX status %q, %v; want %q", got, err, want)
		}
	}
}
