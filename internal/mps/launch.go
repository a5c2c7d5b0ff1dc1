package mps

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// daemonOut is the daemon's stdout and stderr, in its log directory.
const daemonOut = "daemon.out"

// ProcessLauncher runs each daemon as a detached child of this process (see
// the package doc, "Why detached"): it outlives an agent that runs on the
// host, but not a container that holds the agent, whose PID namespace and
// cgroup die with it (internal/mps/daemonpod is for that).
type ProcessLauncher struct {
	// Logger is for the daemons' exits, seen by the reaper goroutine.
	Logger klog.Logger
	// Timeout bounds the wait after SIGKILL; 0 means DefaultTimeout.
	Timeout time.Duration
}

var _ Launcher = (*ProcessLauncher)(nil)

func (p *ProcessLauncher) timeout() time.Duration {
	if p.Timeout <= 0 {
		return DefaultTimeout
	}
	return p.Timeout
}

// Launch starts l.Argv with l.Env over this process's environment (see
// withEnv), in a session of its own, its output appended to l.Output. A
// goroutine waits for it so that it never lingers as a zombie while this
// process lives; after an agent restart it is init's child instead.
func (p *ProcessLauncher) Launch(ctx context.Context, l Launch) (Handle, error) {
	out, err := os.OpenFile(l.Output, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return Handle{}, fmt.Errorf("open daemon output: %w", err)
	}
	// The child gets its own descriptor; ours is not needed after Start.
	defer out.Close()
	cmd := exec.Command(l.Argv[0], l.Argv[1:]...)
	cmd.Env = withEnv(l.Env)
	// Files, not pipes: with a pipe the daemon would die of SIGPIPE once
	// the agent that reads it is gone. Stdin is /dev/null (nil).
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = "/"
	// Its own session: signals to the agent's process group (a terminal's
	// ^C, a supervisor stopping the agent) do not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return Handle{}, fmt.Errorf("launch %s: %w", l.Argv[0], err)
	}
	pid := cmd.Process.Pid
	// Read before the reaper can run: until Wait the process, alive or a
	// zombie, keeps its /proc entry.
	st, statErr := readStat(pid)
	go func() {
		err := cmd.Wait()
		p.Logger.V(2).Info("MPS control daemon exited", "mpsDaemon", l.ID, "pid", pid, "status", fmt.Sprint(err))
	}()
	if statErr != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		return Handle{}, fmt.Errorf("read start time of daemon PID %d: %w", pid, statErr)
	}
	klog.FromContext(ctx).V(2).Info("Launched MPS control daemon", "pid", pid, "devices", l.Devices)
	return Handle{PID: pid, StartTime: st.start}, nil
}

// Alive reports whether h's process runs, with the PID-reuse guard.
func (p *ProcessLauncher) Alive(_ context.Context, h Handle) bool { return alive(h.PID, h.StartTime) }

// Kill SIGKILLs the daemon's process group (the daemon leads it, and the
// MPS servers it spawned are in it) and waits, bounded, until the daemon is
// gone. Only a daemon that is verified alive is signalled: once it is gone,
// its PID may belong to someone else.
func (p *ProcessLauncher) Kill(_ context.Context, h Handle) error {
	if !alive(h.PID, h.StartTime) {
		return nil
	}
	if err := syscall.Kill(-h.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill daemon PID %d: %w", h.PID, err)
	}
	// Not ctx: once killed, confirming it is gone is part of the job even
	// for a caller that gave up waiting.
	if !waitGone(context.Background(), func() bool { return alive(h.PID, h.StartTime) }, p.timeout()) {
		return fmt.Errorf("daemon PID %d still runs %s after SIGKILL", h.PID, p.timeout())
	}
	return nil
}

// Find scans /proc for the daemons of root (scan), oldest first.
func (p *ProcessLauncher) Find(_ context.Context, root string) ([]Found, error) {
	procs, err := scan(root)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(procs, func(i, j int) bool { return procs[i].start < procs[j].start })
	out := make([]Found, 0, len(procs))
	for _, f := range procs {
		out = append(out, Found{ID: f.id, Handle: Handle{PID: f.pid, StartTime: f.start}, Devices: f.devices})
	}
	return out, nil
}

// waitGone waits, up to limit or the end of ctx, until running reports
// false, polling with a growing interval. It reports whether it is gone.
func waitGone(ctx context.Context, running func() bool, limit time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	delay := 2 * time.Millisecond
	for running() {
		select {
		case <-ctx.Done():
			return !running()
		case <-time.After(delay):
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
	return true
}

// logTail is the end of a daemon's output, for errors: why it failed is
// usually there.
func logTail(logDir string) string {
	f, err := os.Open(filepath.Join(logDir, daemonOut))
	if err != nil {
		return ""
	}
	defer f.Close()
	const max = 2048
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		_, _ = f.Seek(-max, io.SeekEnd)
	}
	data, _ := io.ReadAll(f)
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return ""
	}
	return "; daemon output: " + string(data)
}
