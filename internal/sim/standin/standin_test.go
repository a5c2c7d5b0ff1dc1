package standin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runDaemon starts a daemon in this process for devices and returns its
// pipe directory and a channel with Run's result.
func runDaemon(t *testing.T, ctx context.Context, devices ...string) (string, <-chan error) {
	t.Helper()
	dir := t.TempDir()
	d := &Daemon{PipeDir: filepath.Join(dir, "pipe"), LogDir: filepath.Join(dir, "log"), Devices: devices}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	waitReady(t, d.PipeDir, done)
	return d.PipeDir, done
}

// waitReady polls until the daemon answers (bounded by the test's context).
func waitReady(t *testing.T, pipe string, done <-chan error) {
	t.Helper()
	for {
		_, err := Send(t.Context(), pipe, "get_server_list")
		if err == nil {
			return
		}
		if !errors.Is(err, ErrNoDaemon) {
			t.Fatalf("daemon not ready: %v", err)
		}
		select {
		case err := <-done:
			t.Fatalf("daemon exited: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func TestDaemonCommands(t *testing.T) {
	pipe, done := runDaemon(t, t.Context(), "GPU-a", "MIG-b")
	tests := []struct {
		cmd     string
		want    string
		wantErr string
	}{
		{cmd: "get_default_active_thread_percentage", want: "100.0"},
		{cmd: "set_default_active_thread_percentage 25"},
		{cmd: "get_default_active_thread_percentage", want: "25.0"},
		{cmd: "set_default_active_thread_percentage 0", wantErr: "not within"},
		{cmd: "set_default_active_thread_percentage 101", wantErr: "not within"},
		{cmd: "set_default_device_pinned_mem_limit MIG-b 4096M"},
		{cmd: "set_default_device_pinned_mem_limit 0 2G"},
		{cmd: "get_default_device_pinned_mem_limit MIG-b", want: "4096M"},
		{cmd: "get_default_device_pinned_mem_limit GPU-a", want: "0M"},
		{cmd: "set_default_device_pinned_mem_limit GPU-z 1G", wantErr: "not visible"},
		{cmd: "set_default_device_pinned_mem_limit 2 1G", wantErr: "not visible"},
		{cmd: "set_default_device_pinned_mem_limit GPU-a 4096", wantErr: "followed by M or G"},
		{cmd: "set_default_device_pinned_mem_limit GPU-a 1.5G", wantErr: "followed by M or G"},
		{cmd: "set_default_device_pinned_mem_limit GPU-a", wantErr: "takes 2 argument"},
		{cmd: "get_server_list"},
		{cmd: "start_server -uid 0", wantErr: "unknown command"},
		{cmd: "quit now", wantErr: "takes 0 argument"},
	}
	sent := []string{"get_server_list"} // waitReady's probe
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			got, err := Send(t.Context(), pipe, tt.cmd)
			sent = append(sent, tt.cmd)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %q, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	st, err := ReadStatus(pipe)
	if err != nil {
		t.Fatal(err)
	}
	if st.DefaultActiveThreadPercentage != 25 || st.DefaultPinnedMemLimits["MIG-b"] != "4096M" || st.DefaultPinnedMemLimits["0"] != "2G" ||
		len(st.DefaultPinnedMemLimits) != 2 || !slices.Equal(st.Devices, []string{"GPU-a", "MIG-b"}) || st.PID != os.Getpid() || st.Quit {
		t.Errorf("status %+v", st)
	}
	if !slices.Equal(st.Commands, sent) {
		t.Errorf("commands recorded\n%q\nwant\n%q", st.Commands, sent)
	}

	if _, err := Send(t.Context(), pipe, "quit"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run after quit: %v", err)
	}
	if st, err := ReadStatus(pipe); err != nil || !st.Quit {
		t.Errorf("status after quit: %+v, %v", st, err)
	}
	for _, name := range []string{ControlFIFO, PIDFile} {
		if _, err := os.Lstat(filepath.Join(pipe, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left after quit: %v", name, err)
		}
	}
	if _, err := Send(t.Context(), pipe, "get_server_list"); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("Send after quit: %v, want ErrNoDaemon", err)
	}
	logData, _ := os.ReadFile(filepath.Join(filepath.Dir(pipe), "log", LogFile))
	if !bytes.Contains(logData, []byte("Cmd: set_default_device_pinned_mem_limit MIG-b 4096M")) {
		t.Errorf("log lacks the command:\n%s", logData)
	}
}

func TestDaemonStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	pipe, done := runDaemon(t, ctx, "GPU-a")
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
	if _, err := os.Lstat(filepath.Join(pipe, ControlFIFO)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("control FIFO left: %v", err)
	}
}

func TestSecondDaemonRefused(t *testing.T) {
	pipe, _ := runDaemon(t, t.Context(), "GPU-a")
	d := &Daemon{PipeDir: pipe, LogDir: t.TempDir(), Devices: []string{"GPU-b"}}
	if err := d.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "another control daemon") {
		t.Fatalf("second daemon on one pipe directory: %v", err)
	}
	// The first still serves.
	if _, err := Send(t.Context(), pipe, "get_server_list"); err != nil {
		t.Fatal(err)
	}
}

// A FIFO left by a killed daemon is no daemon, and the next one replaces it.
func TestStaleFIFO(t *testing.T) {
	dir := t.TempDir()
	pipe := filepath.Join(dir, "pipe")
	if err := os.MkdirAll(pipe, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(pipe, ControlFIFO), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Send(t.Context(), pipe, "get_server_list"); !errors.Is(err, ErrNoDaemon) {
		t.Fatalf("Send to a stale FIFO: %v, want ErrNoDaemon", err)
	}
	d := &Daemon{PipeDir: pipe, LogDir: filepath.Join(dir, "log"), Devices: []string{"GPU-a"}}
	done := make(chan error, 1)
	go func() { done <- d.Run(t.Context()) }()
	waitReady(t, pipe, done)
	if _, err := Send(t.Context(), pipe, "quit"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A daemon that never answers: Send gives up with the context.
func TestSendGivesUp(t *testing.T) {
	pipe := t.TempDir()
	ctl := filepath.Join(pipe, ControlFIFO)
	if err := syscall.Mkfifo(ctl, 0o600); err != nil {
		t.Fatal(err)
	}
	// A reader that reads nothing: the request is accepted, no answer comes.
	r, err := os.OpenFile(ctl, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Send(ctx, pipe, "get_server_list"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Send: %v, want context.Canceled", err)
	}
	if entries, _ := os.ReadDir(pipe); len(entries) != 1 {
		t.Errorf("reply FIFO left behind: %v", entries)
	}
}

func TestMainArguments(t *testing.T) {
	var out, errOut bytes.Buffer
	if got := Main([]string{"-d"}, strings.NewReader(""), &out, &errOut); got != 2 {
		t.Errorf("-d: exit %d, want 2", got)
	}
	t.Setenv("CUDA_MPS_PIPE_DIRECTORY", "")
	if got := Main(nil, strings.NewReader("quit\n"), &out, &errOut); got != 1 || !strings.Contains(errOut.String(), "CUDA_MPS_PIPE_DIRECTORY") {
		t.Errorf("client without a pipe directory: exit %d, %q", got, errOut.String())
	}
	errOut.Reset()
	t.Setenv("CUDA_MPS_PIPE_DIRECTORY", t.TempDir())
	if got := Main(nil, strings.NewReader("quit\n"), &out, &errOut); got != 1 || !strings.Contains(errOut.String(), ErrNoDaemon.Error()) {
		t.Errorf("client without a daemon: exit %d, %q", got, errOut.String())
	}
	errOut.Reset()
	t.Setenv("CUDA_MPS_LOG_DIRECTORY", "")
	if got := Main([]string{"-f"}, strings.NewReader(""), &out, &errOut); got != 1 || !strings.Contains(errOut.String(), "must be set") {
		t.Errorf("daemon without a log directory: exit %d, %q", got, errOut.String())
	}
}

func TestMainClient(t *testing.T) {
	pipe, done := runDaemon(t, t.Context(), "GPU-a")
	t.Setenv("CUDA_MPS_PIPE_DIRECTORY", pipe)
	var out, errOut bytes.Buffer
	in := "set_default_active_thread_percentage 40\n\nget_default_active_thread_percentage\nquit\n"
	if got := Main(nil, strings.NewReader(in), &out, &errOut); got != 0 {
		t.Fatalf("exit %d: %s", got, errOut.String())
	}
	if out.String() != "40.0\n" {
		t.Errorf("output %q", out.String())
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestReplyOnlyBesideTheSocket: a client names its reply FIFO by base name
// and gets its answer through a directory the daemon sees at another path
// (as a container sees its namespace's directory); a request naming a path
// elsewhere, or a file that is no FIFO, gets no answer and the daemon
// writes nothing there.
func TestReplyOnlyBesideTheSocket(t *testing.T) {
	pipe, _ := runDaemon(t, t.Context(), "GPU-a")
	// The client's view of the pipe directory: another path to it.
	view := filepath.Join(t.TempDir(), "view")
	if err := os.Symlink(pipe, view); err != nil {
		t.Fatal(err)
	}
	if _, err := Send(t.Context(), view, "get_server_list"); err != nil {
		t.Fatalf("through another path to the pipe directory: %v", err)
	}
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	notFIFO := filepath.Join(pipe, "plain")
	if err := os.WriteFile(notFIFO, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(filepath.Join(pipe, ControlFIFO), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{victim, "../" + filepath.Base(victim), "plain"} {
		line, _ := json.Marshal(request{Reply: r, Command: "get_server_list"})
		if _, err := w.Write(append(line, '\n')); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	// Requests are served in order: once this one is answered, so were those.
	if _, err := Send(t.Context(), pipe, "get_server_list"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{victim, notFIFO} {
		if data, err := os.ReadFile(f); err != nil || string(data) != "keep" {
			t.Errorf("%s holds %q (%v): the daemon wrote a reply there", f, data, err)
		}
	}
}
