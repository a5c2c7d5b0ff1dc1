package standin

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The test binary doubles as the program (the os/exec tests' re-exec
// trick): run as "<test binary> mps-control ARGS" it is Main, a real
// process, which a test can kill.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "mps-control" {
		os.Exit(Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	// A race-enabled binary sleeps a second at exit (GORACE atexit_sleep_ms).
	_ = os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	os.Exit(m.Run())
}

// program is the program as a process with env added to this one's.
func program(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, append([]string{"mps-control"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// proc is a started program whose stdout lines and exit come on channels.
type proc struct {
	cmd    *exec.Cmd
	lines  chan string
	exited chan struct{}
	stderr *lockedBuffer
}

func startProgram(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: program(t, env, args...), lines: make(chan string, 16), exited: make(chan struct{}), stderr: &lockedBuffer{}}
	p.cmd.Stderr = p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// wait waits for the process to exit and returns its status.
func (p *proc) wait(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		t.Fatalf("%v still runs after %v; stderr:\n%s", p.cmd.Args, within, p.stderr)
		return -1
	}
}

// line waits for the process's next line of output.
func (p *proc) line(t *testing.T) string {
	t.Helper()
	select {
	case l := <-p.lines:
		return l
	case <-p.exited:
		t.Fatalf("%v exited %d without a line; stderr:\n%s", p.cmd.Args, p.cmd.ProcessState.ExitCode(), p.stderr)
	case <-time.After(10 * time.Second):
		t.Fatalf("no line from %v", p.cmd.Args)
	}
	return ""
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// fifos lists the FIFOs under dir, relative.
func fifos(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type()&fs.ModeNamedPipe != 0 {
			rel, _ := filepath.Rel(dir, path)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return out
}

// writeConfig writes a configuration file and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mps.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
