package mps

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// What /proc says about processes: liveness with a PID-reuse guard, and the
// daemons found by their environment.

// procRoot is /proc; a variable for nothing but clarity in tests' errors.
const procRoot = "/proc"

// procStat is the part of /proc/<pid>/stat the manager needs.
type procStat struct {
	state   byte   // field 3: R, S, D, Z (zombie), X (dead), ...
	session int    // field 6
	start   uint64 // field 22: start time in clock ticks after boot
}

// readStat parses /proc/<pid>/stat. The command name (field 2) is in
// parentheses and may itself hold spaces and parentheses, so fields are
// counted from the last ')'.
func readStat(pid int) (procStat, error) {
	data, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	return parseStat(data)
}

func parseStat(data []byte) (procStat, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("malformed stat %q", data)
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3, so field n is f[n-3].
	if len(f) < 22-3+1 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("malformed stat %q", data)
	}
	session, err1 := strconv.Atoi(f[6-3])
	start, err2 := strconv.ParseUint(f[22-3], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return procStat{}, fmt.Errorf("malformed stat %q: %w", data, err)
	}
	return procStat{state: f[0][0], session: session, start: start}, nil
}

// alive reports whether pid is the process that started at start: it exists
// (kill(pid, 0); EPERM means it exists but is not ours to signal), has not
// exited (a zombie waits only for its parent to reap it) and its start time
// matches, so a reused PID is not mistaken for the daemon.
func alive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	st, err := readStat(pid)
	if err != nil {
		return false
	}
	return st.state != 'Z' && st.state != 'X' && st.start == start
}

// found is a daemon process located by its environment.
type found struct {
	id      string
	pid     int
	start   uint64
	devices []string
}

// scan lists the live daemons of root: processes whose environment says
// TESSERA_MPS_DAEMON=<id> and CUDA_MPS_PIPE_DIRECTORY=<root>/<id>/pipe (so
// another manager's daemons, with another root, are not ours) and that lead
// their session, as the daemon Start launched does: an MPS server the
// daemon spawns inherits its environment but not its session leadership.
// Processes that vanish or whose environment is unreadable are skipped.
func scan(root string) ([]found, error) {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, fmt.Errorf("scan %s: %w", procRoot, err)
	}
	var out []found
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		env, err := os.ReadFile(filepath.Join(procRoot, e.Name(), "environ"))
		if err != nil {
			continue
		}
		id, pipe, devices := daemonEnv(env)
		if id == "" || pipe != pipeDir(root, id) {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.session != pid || st.state == 'Z' || st.state == 'X' {
			continue
		}
		out = append(out, found{id: id, pid: pid, start: st.start, devices: devices})
	}
	return out, nil
}

// daemonEnv picks the daemon's id, pipe directory and devices out of a
// NUL-separated environment block.
func daemonEnv(env []byte) (id, pipe string, devices []string) {
	for _, kv := range bytes.Split(env, []byte{0}) {
		k, v, ok := strings.Cut(string(kv), "=")
		if !ok {
			continue
		}
		switch k {
		case EnvDaemonID:
			id = v
		case envPipeDir:
			pipe = v
		case envVisibleDevices:
			if v != "" {
				devices = strings.Split(v, ",")
			}
		}
	}
	return id, pipe, devices
}
