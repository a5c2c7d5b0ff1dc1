package localcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// start runs a component in its own process group with its output in a log
// file, and records it in the state before returning.
func (c *Config) start(s *State, name, bin string, args ...string) (*Proc, error) {
	if err := os.MkdirAll(c.LogDir(), 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(c.LogDir(), name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Components run inside the cluster directory, never in the caller's:
	// anything one resolves against its working directory (the kubelet
	// globs and removes container logs by path) stays in the cluster's tree.
	cmd.Dir = workDir(c.Dir, name)
	if err := os.MkdirAll(cmd.Dir, 0o755); err != nil {
		return nil, err
	}
	// Its own group: a Ctrl-C on `make` must not kill the cluster halfway,
	// and Down can stop a component together with any children.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	// Reap it when it exits so a crash is visible as "not running".
	go cmd.Wait() //nolint:errcheck
	p := Proc{Name: name, Pid: cmd.Process.Pid, Args: append([]string{bin}, args...), Log: logPath}
	s.Procs = append(s.Procs, p)
	if err := c.saveState(s); err != nil {
		return nil, err
	}
	return &s.Procs[len(s.Procs)-1], nil
}

func workDir(dir, name string) string { return filepath.Join(dir, "run", name) }

// alive reports whether pid is running the binary we started (a pid may be
// reused by an unrelated process after a reboot or a long time).
func alive(p Proc) bool {
	if p.Pid <= 0 {
		return false
	}
	if err := syscall.Kill(p.Pid, 0); err != nil {
		return false
	}
	exe := procExe(p.Pid)
	if exe == "" || len(p.Args) == 0 {
		return false
	}
	want, _ := filepath.Abs(p.Args[0])
	return exe == want
}

// procExe is the program pid runs (even when its file was replaced), ""
// when it cannot be read.
func procExe(pid int) string {
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(exe, " (deleted)")
}

// stop sends SIGTERM to the process group, waits, then SIGKILL.
func stop(p Proc, grace time.Duration) error {
	if !alive(p) {
		return nil
	}
	_ = syscall.Kill(-p.Pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !alive(p) || zombie(p.Pid) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	for i := 0; i < 100; i++ {
		if !alive(p) || zombie(p.Pid) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s (pid %d) did not stop", p.Name, p.Pid)
}

func zombie(pid int) bool {
	state, _, err := procStat(pid)
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	return state == "Z"
}

// procStat reads a process's state and parent pid from /proc/<pid>/stat:
// the fields after the parenthesised command name (which may itself hold
// spaces and parentheses).
func procStat(pid int) (state string, ppid int, err error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	var f []string
	if i >= 0 {
		f = strings.Fields(s[i+1:])
	}
	if len(f) < 2 {
		return "", 0, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, s)
	}
	ppid, err = strconv.Atoi(f[1])
	return f[0], ppid, err
}

// pids lists the processes of the machine.
func pids() ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out, nil
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
