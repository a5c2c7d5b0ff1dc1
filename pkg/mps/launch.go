package mps

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// daemonOut is the daemon's stdout and stderr, in its log directory.
const daemonOut = "daemon.out"

// launch starts the control program as a daemon for id, detached from the
// agent (see the package doc), and returns its PID and start time. A
// goroutine waits for it so that it never lingers as a zombie while this
// process lives; after an agent restart it is init's child instead.
func (m *Manager) launch(logger klog.Logger, id string, devices []string, pipe, logDir string) (int, uint64, error) {
	out, err := os.OpenFile(filepath.Join(logDir, daemonOut), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return 0, 0, fmt.Errorf("open daemon output: %w", err)
	}
	// The child gets its own descriptor; ours is not needed after Start.
	defer out.Close()
	cmd := exec.Command(m.control[0], append(slices.Clone(m.control[1:]), "-f")...)
	cmd.Env = withEnv(map[string]string{
		envVisibleDevices: strings.Join(devices, ","),
		envPipeDir:        pipe,
		envLogDir:         logDir,
		EnvDaemonID:       id,
	})
	// Files, not pipes: with a pipe the daemon would die of SIGPIPE once
	// the agent that reads it is gone. Stdin is /dev/null (nil).
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = "/"
	// Its own session: signals to the agent's process group (a terminal's
	// ^C, a supervisor stopping the agent) do not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, 0, fmt.Errorf("launch %s: %w", m.control[0], err)
	}
	pid := cmd.Process.Pid
	// Read before the reaper can run: until Wait the process, alive or a
	// zombie, keeps its /proc entry.
	st, statErr := readStat(pid)
	go func() {
		err := cmd.Wait()
		m.logger.V(2).Info("MPS control daemon exited", "mpsDaemon", id, "pid", pid, "status", fmt.Sprint(err))
	}()
	if statErr != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		return 0, 0, fmt.Errorf("read start time of daemon PID %d: %w", pid, statErr)
	}
	logger.V(2).Info("Launched MPS control daemon", "pid", pid, "devices", devices)
	return pid, st.start, nil
}

// waitGone waits, up to limit or the end of ctx, until the process pid that
// started at start is gone, polling with a growing interval. It reports
// whether it is gone.
func waitGone(ctx context.Context, pid int, start uint64, limit time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	delay := 2 * time.Millisecond
	for alive(pid, start) {
		select {
		case <-ctx.Done():
			return !alive(pid, start)
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
