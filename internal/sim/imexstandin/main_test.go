package imexstandin

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/internal/imex"
)

// TestRunRefuses: a daemon that cannot do its job fails at once, saying
// which file or setting is wrong.
func TestRunRefuses(t *testing.T) {
	good := newTray(t, freePort(t), loopbacks(2), imex.QuorumRecovery)
	noSocket := rewrite(t, good, func(c *imex.Config) { c.CmdUnixSocket = "" })
	noNodes := rewrite(t, good, func(c *imex.Config) { c.NodesFile = filepath.Join(t.TempDir(), "none.cfg") })
	elsewhere := newTray(t, freePort(t), notLocal(t), imex.QuorumRecovery)
	badLine := filepath.Join(t.TempDir(), "config.cfg")
	if err := os.WriteFile(badLine, []byte("SERVER_PORT=1\nLOG_LEVEL four\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		d       *Daemon
		wantErr string
	}{
		{name: "no config", d: &Daemon{ConfigFile: filepath.Join(t.TempDir(), "config.cfg")}, wantErr: "IMEX config: open"},
		{name: "bad config line", d: &Daemon{ConfigFile: badLine}, wantErr: `config.cfg: line 2 "LOG_LEVEL four"`},
		{name: "no command socket", d: &Daemon{ConfigFile: noSocket.config}, wantErr: "the stand-in needs IMEX_CMD_UNIX_DOMAIN_PATH"},
		{name: "no nodes file", d: &Daemon{ConfigFile: noNodes.config}, wantErr: "IMEX nodes file (IMEX_NODE_CONFIG_FILE of " + noNodes.config},
		{name: "address not listed", d: &Daemon{ConfigFile: good.config, Address: "127.0.0.9"}, wantErr: "address 127.0.0.9 is not a line of the nodes file"},
		{name: "no address of its own", d: &Daemon{ConfigFile: elsewhere.config}, wantErr: "no line of the nodes file " + filepath.Dir(elsewhere.config)},
		{name: "negative backoff", d: &Daemon{ConfigFile: good.config, MinBackoff: -1}, wantErr: "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.d.Run(t.Context()); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Run: %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}

// notLocal is two documentation addresses (RFC 5737) that this machine
// cannot listen on; some machines have one.
func notLocal(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, a := range []string{"192.0.2.1", "192.0.2.2", "198.51.100.1", "198.51.100.2", "203.0.113.1", "203.0.113.2"} {
		if ln, err := net.Listen("tcp", net.JoinHostPort(a, "0")); err == nil {
			ln.Close()
			continue
		}
		if out = append(out, a); len(out) == 2 {
			return out
		}
	}
	t.Fatal("this machine can listen on every documentation address")
	return nil
}

// rewrite writes tr's config changed by edit beside a copy of its nodes
// file, as a new tray.
func rewrite(t *testing.T, tr tray, edit func(*imex.Config)) tray {
	t.Helper()
	c := config(t, tr)
	dir := t.TempDir()
	c.CmdUnixSocket = filepath.Join(dir, "imex.sock")
	edit(&c)
	out := tray{config: filepath.Join(dir, "config.cfg"), socket: c.CmdUnixSocket}
	if err := os.WriteFile(out.config, c.Render(), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSecondDaemonRefused: one socket, one daemon; a socket a dead daemon
// left is taken over.
func TestSecondDaemonRefused(t *testing.T) {
	tr := domain(t, 1)[0]
	start(t, tr, "")
	d := &Daemon{ConfigFile: tr.config}
	if err := d.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "another IMEX daemon serves "+tr.socket) {
		t.Fatalf("second daemon: %v", err)
	}

	stale := domain(t, 1)[0]
	ln, err := net.Listen("unix", stale.socket)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	start(t, stale, "")
	waitStatus(t, stale, "READY", is(imex.ReadyStatus))
}

func TestCtlMain(t *testing.T) {
	tr := domain(t, 1)[0]
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := CtlMain(args, &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, _, errs := run("-c", tr.config, "-q"); code != 1 || !strings.Contains(errs, "no IMEX daemon answers on "+tr.socket) {
		t.Errorf("without a daemon: exit %d, %q", code, errs)
	}
	if code, _, errs := run("-c", tr.config); code != 2 || !strings.Contains(errs, "only -q") {
		t.Errorf("without -q: exit %d, %q", code, errs)
	}
	if code, _, errs := run("-c", filepath.Join(t.TempDir(), "x.cfg"), "-q"); code != 1 || !strings.Contains(errs, "x.cfg") {
		t.Errorf("without a config: exit %d, %q", code, errs)
	}
	start(t, tr, "")
	if code, out, errs := run("-c", tr.config, "-q"); code != 0 || out != "READY\n" {
		t.Errorf("with a daemon: exit %d, %q, %q", code, out, errs)
	}
}

// TestProgram: the daemon as a process (Main) serves imex-ctl and exits 0
// on SIGTERM, its socket gone.
func TestProgram(t *testing.T) {
	tr := domain(t, 1)[0]
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "imex", "-c", tr.config)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	waitStatus(t, tr, "READY", is(imex.ReadyStatus))
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("exit: %v; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(within):
		t.Fatalf("still runs %v after SIGTERM", within)
	}
	if _, err := os.Lstat(tr.socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left: %v", err)
	}
	if !strings.Contains(stderr.String(), "IMEX stand-in started") {
		t.Errorf("stderr lacks the start:\n%s", stderr.String())
	}
}

func TestMainArguments(t *testing.T) {
	var errb bytes.Buffer
	if code := Main([]string{"--bogus"}, &errb); code != 2 {
		t.Errorf("--bogus: exit %d", code)
	}
	if code := Main([]string{"-c", "x", "extra"}, &errb); code != 2 || !strings.Contains(errb.String(), "unexpected arguments") {
		t.Errorf("extra argument: exit %d, %q", code, errb.String())
	}
	errb.Reset()
	if code := Main([]string{"-c", filepath.Join(t.TempDir(), "none.cfg")}, &errb); code != 1 || !strings.Contains(errb.String(), "none.cfg") {
		t.Errorf("no config: exit %d, %q", code, errb.String())
	}
}
