package standin

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// daemonProc starts the daemon as a process on pipe with extra env and
// args after -f, and waits until it answers.
func daemonProc(t *testing.T, pipe string, env []string, args ...string) *proc {
	t.Helper()
	env = append([]string{"CUDA_MPS_PIPE_DIRECTORY=" + pipe, "CUDA_MPS_LOG_DIRECTORY=" + filepath.Join(filepath.Dir(pipe), "log"), "CUDA_VISIBLE_DEVICES=GPU-a,GPU-b", "CUDA_MPS_PROTOCOL_VERSION="}, env...)
	p := startProgram(t, env, append([]string{"-f"}, args...)...)
	for {
		_, err := Send(t.Context(), pipe, "get_server_list")
		if err == nil {
			return p
		}
		if !errors.Is(err, ErrNoDaemon) {
			t.Fatalf("daemon not ready: %v", err)
		}
		select {
		case <-p.exited:
			t.Fatalf("daemon exited %d: %s", p.cmd.ProcessState.ExitCode(), p.stderr)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func TestDaemonArguments(t *testing.T) {
	bad := writeConfig(t, "schema_version = \"1.0\"\n[servers.s]\nallowed_devices = \"GPU-a\"\nmax_clients = \"2\"\n")
	hidden := writeConfig(t, "schema_version = \"1.0\"\n[servers.s]\nallowed_devices = \"GPU-c\"\n")
	tests := []struct {
		name   string
		env    []string
		args   []string
		status int
		stderr string
	}{
		{name: "unknown key", args: []string{"-f", "-p", "3", "-a", bad}, status: 1, stderr: "unknown key servers.s.max_clients"},
		{name: "unknown key, protocol from the environment", env: []string{"CUDA_MPS_PROTOCOL_VERSION=3"}, args: []string{"-f", "-a", bad}, status: 1, stderr: "unknown key servers.s.max_clients"},
		{name: "device not visible", args: []string{"-f", "-p", "3", "-a", hidden}, status: 1, stderr: `servers.s.allowed_devices: device "GPU-c" is not visible`},
		{name: "missing file", args: []string{"-f", "-p", "3", "-a", filepath.Join(t.TempDir(), "none.toml")}, status: 1, stderr: "configuration error"},
		{name: "config without protocol 3", args: []string{"-f", "-a", bad}, status: 1, stderr: "needs protocol 3"},
		{name: "protocol 4", args: []string{"-f", "-p", "4"}, status: 2, stderr: `protocol "4" is not 2 or 3`},
		{name: "protocol 4 from the environment", env: []string{"CUDA_MPS_PROTOCOL_VERSION=4"}, args: []string{"-f"}, status: 2, stderr: "not 2 or 3"},
		{name: "-p without a value", args: []string{"-f", "-p"}, status: 2, stderr: "unsupported arguments"},
		{name: "-p without -f", args: []string{"-p", "3"}, status: 2, stderr: "unsupported arguments"},
		{name: "client with an argument", args: []string{"client", "now"}, status: 2, stderr: "unsupported arguments"},
		{name: "client without a daemon", args: []string{"client"}, status: 1, stderr: ErrNoDaemon.Error()},
		{name: "-q without a daemon", args: []string{"-q"}, status: 1, stderr: ErrNoDaemon.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			env := append([]string{"CUDA_MPS_PIPE_DIRECTORY=" + filepath.Join(dir, "pipe"), "CUDA_MPS_LOG_DIRECTORY=" + filepath.Join(dir, "log"), "CUDA_VISIBLE_DEVICES=GPU-a,GPU-b", "CUDA_MPS_PROTOCOL_VERSION="}, tt.env...)
			p := startProgram(t, env, tt.args...)
			if got := p.wait(t, 10*time.Second); got != tt.status || !strings.Contains(p.stderr.String(), tt.stderr) {
				t.Errorf("exit %d, stderr %q; want %d with %q", got, p.stderr, tt.status, tt.stderr)
			}
			if tt.status == 1 && strings.HasPrefix(tt.args[0], "-f") {
				if got := fifos(t, dir); len(got) != 0 {
					t.Errorf("FIFOs made by a daemon that did not start: %q", got)
				}
			}
		})
	}
}

// Protocol selection, and each daemon run its own Instance.
func TestDaemonProtocolAndInstance(t *testing.T) {
	pipe := filepath.Join(t.TempDir(), "pipe")
	tests := []struct {
		name     string
		env      []string
		args     []string
		protocol int
	}{
		{name: "legacy", protocol: 2},
		{name: "-p 2", args: []string{"-p", "2"}, protocol: 2},
		{name: "-p 3 alone", args: []string{"-p", "3"}, protocol: 3},
		{name: "environment", env: []string{"CUDA_MPS_PROTOCOL_VERSION=3"}, protocol: 3},
		{name: "-p over the environment", env: []string{"CUDA_MPS_PROTOCOL_VERSION=3"}, args: []string{"-p", "2"}, protocol: 2},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := daemonProc(t, pipe, tt.env, tt.args...)
			st, err := ReadStatus(pipe)
			if err != nil {
				t.Fatal(err)
			}
			if st.Executable != p.cmd.Path {
				t.Errorf("executable %q, want %q (what ran)", st.Executable, p.cmd.Path)
			}
			if st.Protocol != tt.protocol || st.PID != p.cmd.Process.Pid || len(st.Instance) != 16 || time.Since(st.Started) > time.Minute {
				t.Errorf("status %+v, want protocol %d", st, tt.protocol)
			}
			if seen[st.Instance] {
				t.Errorf("instance %s again", st.Instance)
			}
			seen[st.Instance] = true
			// Legacy commands are refused by protocol 3 only.
			_, err = Send(t.Context(), pipe, "get_default_active_thread_percentage")
			if refused := err != nil && strings.Contains(err.Error(), "runs protocol 3"); refused != (tt.protocol == 3) {
				t.Errorf("legacy command: %v", err)
			}
			// -q is quit, as for the real program.
			if out, err := program(t, []string{"CUDA_MPS_PIPE_DIRECTORY=" + pipe}, "-q").CombinedOutput(); err != nil {
				t.Fatalf("-q: %v: %s", err, out)
			}
			if got := p.wait(t, 10*time.Second); got != 0 {
				t.Errorf("daemon exit %d after -q", got)
			}
			if st, err := ReadStatus(pipe); err != nil || !st.Quit {
				t.Errorf("status after -q: %+v, %v", st, err)
			}
		})
	}
}

// clientEnv runs a client on the socket in dir.
func clientEnv(dir string) []string { return []string{"CUDA_MPS_PIPE_DIRECTORY=" + dir} }

// clients is the admin's client list.
func clients(t *testing.T, pipe string) string {
	t.Helper()
	out, err := Send(t.Context(), pipe, "client list --all")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestClientSession(t *testing.T) {
	cfg := writeConfig(t, v3Config)
	tests := []struct {
		name string
		// end ends the session's daemon or namespace, or the client.
		end        func(t *testing.T, pipe string, daemon, client *proc)
		status     int
		stderr     string
		leftListed bool
	}{
		{
			name: "daemon killed",
			end: func(t *testing.T, _ string, daemon, _ *proc) {
				_ = daemon.cmd.Process.Kill()
			},
			status: ExitDaemonGone, stderr: ErrNoDaemon.Error(),
		},
		{
			name: "daemon stopped",
			end: func(t *testing.T, pipe string, daemon, _ *proc) {
				_ = daemon.cmd.Process.Signal(syscall.SIGTERM)
				if got := daemon.wait(t, 10*time.Second); got != 0 {
					t.Errorf("daemon exit %d on SIGTERM", got)
				}
				// The client's reply FIFO of a ping in flight is the client's.
				got := slices.DeleteFunc(fifos(t, pipe), func(p string) bool { return strings.HasPrefix(filepath.Base(p), ".reply-") })
				if len(got) != 0 {
					t.Errorf("FIFOs left after SIGTERM: %q", got)
				}
			},
			status: ExitDaemonGone, stderr: ErrNoDaemon.Error(),
		},
		{
			name: "namespace deleted",
			end: func(t *testing.T, pipe string, _, _ *proc) {
				if _, err := Send(t.Context(), pipe, "namespace delete --server=gpu0 --name=t1"); err != nil {
					t.Fatal(err)
				}
			},
			status: ExitDaemonGone, stderr: ErrNoDaemon.Error(),
		},
		{
			// A new daemon in the pipe directory: the client's session was
			// the old one's (its ping in flight, if any, sees the old go).
			name: "daemon replaced",
			end: func(t *testing.T, pipe string, daemon, client *proc) {
				before, err := ReadStatus(pipe)
				if err != nil {
					t.Fatal(err)
				}
				_ = client.cmd.Process.Signal(syscall.SIGSTOP)
				_ = daemon.cmd.Process.Kill()
				daemon.wait(t, 10*time.Second)
				daemonProc(t, pipe, nil, "-p", "3", "-a", cfg)
				if _, err := Send(t.Context(), pipe, "namespace create --server=gpu0 --name=t1"); err != nil {
					t.Fatal(err)
				}
				after, err := ReadStatus(pipe)
				if err != nil {
					t.Fatal(err)
				}
				if after.Instance == before.Instance || !after.Started.After(before.Started) {
					t.Errorf("new daemon's instance %s at %v, old %s at %v", after.Instance, after.Started, before.Instance, before.Started)
				}
				_ = client.cmd.Process.Signal(syscall.SIGCONT)
			},
			status: ExitDaemonGone, stderr: "lost the MPS server",
		},
		{
			// The daemon forgot the session (as a new daemon has): the
			// next ping is refused.
			name: "session dropped",
			end: func(t *testing.T, pipe string, _, client *proc) {
				cmd := "client disconnect --pid=" + strconv.Itoa(client.cmd.Process.Pid) + " --pid-ns=" + pidNamespace()
				if _, err := Send(t.Context(), filepath.Join(pipe, "gpu0", "t1"), cmd); err != nil {
					t.Fatal(err)
				}
			},
			status: ExitDaemonGone, stderr: ErrUnknownClient.Error(),
		},
		{
			name: "client stopped",
			end: func(t *testing.T, _ string, _, client *proc) {
				_ = client.cmd.Process.Signal(syscall.SIGTERM)
			},
			status: 0,
		},
		{
			name:   "client killed",
			end:    func(t *testing.T, _ string, _, client *proc) { _ = client.cmd.Process.Kill() },
			status: -1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pipe := filepath.Join(t.TempDir(), "pipe")
			daemon := daemonProc(t, pipe, nil, "-p", "3", "-a", cfg)
			if _, err := Send(t.Context(), pipe, "namespace create --server=gpu0 --name=t1 --pinned-memory-limit=1G"); err != nil {
				t.Fatal(err)
			}
			client := startProgram(t, clientEnv(filepath.Join(pipe, "gpu0", "t1")), "client", "--hold", "--interval=20ms")
			if got := client.line(t); got != "connected" {
				t.Fatalf("client said %q", got)
			}
			want := strconv.Itoa(client.cmd.Process.Pid) + " gpu0/t1"
			if got := clients(t, pipe); got != want {
				t.Fatalf("clients %q, want %q", got, want)
			}
			// Held, it stays listed past a few pings.
			time.Sleep(100 * time.Millisecond)
			if got := clients(t, pipe); got != want {
				t.Fatalf("clients after pings %q, want %q", got, want)
			}
			tt.end(t, pipe, daemon, client)
			if got := client.wait(t, 10*time.Second); got != tt.status || !strings.Contains(client.stderr.String(), tt.stderr) {
				t.Errorf("client exit %d, stderr %q; want %d with %q", got, client.stderr, tt.status, tt.stderr)
			}
			if tt.status != ExitDaemonGone {
				if got := clients(t, pipe); got != "" {
					t.Errorf("clients after the client's end: %q", got)
				}
			}
		})
	}
}

// A legacy daemon keeps sessions too, on its one FIFO.
func TestLegacyClientSession(t *testing.T) {
	pipe := filepath.Join(t.TempDir(), "pipe")
	daemon := daemonProc(t, pipe, nil)
	client := startProgram(t, clientEnv(pipe), "client", "--hold", "--interval=20ms")
	if got := client.line(t); got != "connected" {
		t.Fatalf("client said %q", got)
	}
	if got, want := clients(t, pipe), strconv.Itoa(client.cmd.Process.Pid); got != want {
		t.Errorf("clients %q, want %q", got, want)
	}
	st, err := ReadStatus(pipe)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Clients) != 1 || st.Clients[0].PID != client.cmd.Process.Pid || st.Clients[0].Server != "" || st.Clients[0].Namespace != "" || st.Protocol != 2 {
		t.Errorf("status %+v", st)
	}
	// Pings are not in the record of commands; the rest are.
	if !slices.Equal(st.Commands, []string{"get_server_list", st.Commands[1], "client list --all"}) || !strings.HasPrefix(st.Commands[1], "client connect --pid=") {
		t.Errorf("commands %q", st.Commands)
	}
	// Without --hold a client connects and exits.
	once := program(t, clientEnv(pipe), "client")
	if out, err := once.Output(); err != nil || string(out) != "connected\n" {
		t.Errorf("client without --hold: %q, %v", out, err)
	}
	_ = daemon.cmd.Process.Kill()
	if got := client.wait(t, 10*time.Second); got != ExitDaemonGone {
		t.Errorf("client exit %d when its daemon was killed, want %d: %s", got, ExitDaemonGone, client.stderr)
	}
	// The next daemon replaces the FIFO the killed one left.
	if got := fifos(t, pipe); !slices.Equal(got, []string{ControlFIFO}) {
		t.Errorf("FIFOs after SIGKILL %q", got)
	}
	daemonProc(t, pipe, nil)
	if _, err := os.Stat(filepath.Join(pipe, PIDFile)); err != nil {
		t.Error(err)
	}
}

// A new daemon knows none of the old one's sessions.
func TestNewDaemonForgetsSessions(t *testing.T) {
	pipe := filepath.Join(t.TempDir(), "pipe")
	cfg := writeConfig(t, v3Config)
	ns := filepath.Join(pipe, "gpu0", "conf")
	old := daemonProc(t, pipe, nil, "-p", "3", "-a", cfg)
	if _, err := Send(t.Context(), ns, "client connect --pid=5"); err != nil {
		t.Fatal(err)
	}
	_ = old.cmd.Process.Kill()
	old.wait(t, 10*time.Second)
	if _, err := Send(t.Context(), ns, "client ping --pid=5"); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("ping with the daemon killed: %v, want ErrNoDaemon", err)
	}
	daemonProc(t, pipe, nil, "-p", "3", "-a", cfg)
	if _, err := Send(t.Context(), ns, "client ping --pid=5"); !errors.Is(err, ErrUnknownClient) {
		t.Errorf("ping of the new daemon: %v, want ErrUnknownClient", err)
	}
}
