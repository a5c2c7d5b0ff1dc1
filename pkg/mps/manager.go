package mps

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/pkg/backend"
	"github.com/tessera-gpu/tessera/pkg/host"
	"github.com/tessera-gpu/tessera/pkg/keyed"
)

// DefaultTimeout bounds each wait of a Manager when Config.Timeout is 0.
const DefaultTimeout = 10 * time.Second

// Config configures New.
type Config struct {
	// Root holds one directory per daemon (made absolute; created when the
	// first daemon starts). Keep it short on real hardware: the daemon
	// creates unix sockets in <Root>/<id>/pipe, and a socket path may not
	// pass 107 bytes.
	Root string
	// Control is the argv of the control program: for NVIDIA
	// ["nvidia-cuda-mps-control"]; the daemon is Control plus "-f", a
	// client Control alone.
	Control []string
	// Logger is for the daemons' background events (a daemon exiting);
	// calls log through klog.FromContext.
	Logger klog.Logger
	// Timeout bounds each wait: for a new daemon to accept commands, for
	// one control command, for a daemon to exit after quit and again after
	// SIGKILL. 0 means DefaultTimeout.
	Timeout time.Duration
	// BootID is the boot the daemons' records are written in and checked
	// against; "" means the host's. A simulated node that reboots on its
	// own (pkg/backend/sim) passes its own.
	BootID string
	// Launcher runs the daemon processes; nil means ProcessLauncher, the
	// agent's own detached children.
	Launcher Launcher
}

// Manager starts, adopts, lists and stops the MPS control daemons under one
// root. It is safe for concurrent use: calls for one id are serialised,
// calls for different ids run in parallel.
type Manager struct {
	root    string
	control []string
	logger  klog.Logger
	timeout time.Duration
	bootID  string
	locks   keyed.Mutex
}

// New returns a manager for c. It touches no files: Root is created by the
// first Start.
func New(c Config) (*Manager, error) {
	if len(c.Control) == 0 || c.Control[0] == "" {
		return nil, errors.New("mps: no control program")
	}
	if c.Root == "" {
		return nil, errors.New("mps: no root directory")
	}
	root, err := filepath.Abs(c.Root)
	if err != nil {
		return nil, fmt.Errorf("mps: root directory: %w", err)
	}
	boot := c.BootID
	if boot == "" {
		if boot, err = host.BootID(); err != nil {
			return nil, fmt.Errorf("mps: %w", err)
		}
	}
	m := &Manager{root: root, control: slices.Clone(c.Control), logger: c.Logger, timeout: c.Timeout, bootID: boot}
	if m.timeout <= 0 {
		m.timeout = DefaultTimeout
	}
	return m, nil
}

// Root is the manager's root directory, absolute.
func (m *Manager) Root() string { return m.root }

func (m *Manager) dir(id string) string { return filepath.Join(m.root, id) }

func pipeDir(root, id string) string { return filepath.Join(root, id, "pipe") }

func logDir(root, id string) string { return filepath.Join(root, id, "log") }

// Start starts the daemon of spec and returns once it accepts commands with
// spec's defaults applied. A live daemon with the same id and devices, in
// the same order, is adopted (Adopted=true, defaults applied again); a dead
// one, or one serving other devices, is stopped and replaced. A daemon that
// Start launched and that fails is killed and its directory removed; an
// adopted one that does not answer is left running (its clients may still
// be served) and the error says so.
func (m *Manager) Start(ctx context.Context, spec backend.MPSDaemonSpec) (*backend.MPSDaemon, error) {
	if err := validate(spec); err != nil {
		return nil, fmt.Errorf("mps: start daemon %s: %w", spec.ID, err)
	}
	logger := klog.FromContext(ctx).WithValues("mpsDaemon", spec.ID)
	defer m.locks.Lock(spec.ID)()
	d, err := m.start(ctx, logger, spec)
	if err != nil {
		return nil, fmt.Errorf("mps: start daemon %s for %s: %w", spec.ID, strings.Join(spec.Devices, ","), err)
	}
	return d, nil
}

func (m *Manager) start(ctx context.Context, logger klog.Logger, spec backend.MPSDaemonSpec) (*backend.MPSDaemon, error) {
	dir, pipe, logs := m.dir(spec.ID), pipeDir(m.root, spec.ID), logDir(m.root, spec.ID)
	st, err := m.inspect(logger, spec.ID, nil)
	if err != nil {
		return nil, err
	}
	out := &backend.MPSDaemon{ID: spec.ID, PipeDir: pipe, LogDir: logs}
	switch {
	case st.running && slices.Equal(st.devices, spec.Devices):
		if !st.recorded {
			// Found through its environment: write down what the crash
			// between launch and record lost.
			rec := &record{ID: spec.ID, Devices: slices.Clone(spec.Devices), BootID: m.bootID, PID: st.pid, StartTime: st.start}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, fmt.Errorf("create daemon directory: %w", err)
			}
			if err := writeRecord(dir, rec); err != nil {
				return nil, err
			}
		}
		if err := m.apply(ctx, spec, pipe, func() bool { return !alive(st.pid, st.start) }); err != nil {
			return nil, fmt.Errorf("adopted daemon (PID %d): %w", st.pid, err)
		}
		logger.V(2).Info("Adopted running MPS control daemon", "pid", st.pid)
		out.PID, out.Adopted = st.pid, true
		return out, nil
	case st.running:
		logger.Info("MPS control daemon serves other devices, replacing it", "pid", st.pid, "devices", st.devices, "want", spec.Devices)
		if err := m.stopProcess(ctx, logger, pipe, st); err != nil {
			return nil, err
		}
	case st.rec != nil:
		logger.V(2).Info("MPS control daemon recorded but not running, starting it anew", "pid", st.rec.PID)
	}

	// A dead daemon's pipes must not confuse the new one; its logs stay.
	if err := os.RemoveAll(pipe); err != nil {
		return nil, fmt.Errorf("remove stale pipe directory: %w", err)
	}
	for _, d := range []string{pipe, logs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create daemon directory: %w", err)
		}
	}
	rec := &record{ID: spec.ID, Devices: slices.Clone(spec.Devices), BootID: m.bootID}
	if err := writeRecord(dir, rec); err != nil {
		return nil, err
	}
	pid, start, err := m.launch(logger, spec.ID, spec.Devices, pipe, logs)
	if err != nil {
		m.discard(logger, dir)
		return nil, err
	}
	launched := daemonState{rec: rec, running: true, recorded: true, pid: pid, start: start, devices: spec.Devices}
	rec.PID, rec.StartTime = pid, start
	err = writeRecord(dir, rec)
	if err == nil {
		err = m.apply(ctx, spec, pipe, func() bool { return !alive(pid, start) })
	}
	if err != nil {
		err = fmt.Errorf("daemon PID %d: %w%s", pid, err, logTail(logs))
		if kerr := m.kill(logger, launched); kerr != nil {
			// The record stays, so Stop or the next Start finds it.
			return nil, fmt.Errorf("%w (and %v)", err, kerr)
		}
		m.discard(logger, dir)
		return nil, err
	}
	logger.V(1).Info("Started MPS control daemon", "pid", pid, "devices", spec.Devices, "pipeDir", pipe)
	out.PID = pid
	return out, nil
}

// discard removes what a failed Start made; failing to is only logged, as
// Stop removes it later.
func (m *Manager) discard(logger klog.Logger, dir string) {
	if err := os.RemoveAll(dir); err != nil {
		logger.Error(err, "Removing the directory of a daemon that failed to start", "dir", dir)
	}
}

// Stop stops the daemon with id, if any runs, and removes its directory.
// A daemon that does not exist is not an error.
func (m *Manager) Stop(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return fmt.Errorf("mps: stop daemon: %w", err)
	}
	logger := klog.FromContext(ctx).WithValues("mpsDaemon", id)
	defer m.locks.Lock(id)()
	st, err := m.inspect(logger, id, nil)
	if err != nil {
		return fmt.Errorf("mps: stop daemon %s: %w", id, err)
	}
	if err := m.stopProcess(ctx, logger, pipeDir(m.root, id), st); err != nil {
		return fmt.Errorf("mps: stop daemon %s: %w", id, err)
	}
	dir := m.dir(id)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) && !st.running {
		logger.V(4).Info("No MPS control daemon to stop")
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("mps: stop daemon %s: remove its directory: %w", id, err)
	}
	logger.V(1).Info("Stopped MPS control daemon", "pid", st.pid)
	return nil
}

// stopProcess asks a running daemon to quit, waits (bounded), then kills
// its process group.
func (m *Manager) stopProcess(ctx context.Context, logger klog.Logger, pipe string, st daemonState) error {
	if !st.running {
		return nil
	}
	if _, err := m.send(ctx, pipe, cmdQuit); err != nil {
		logger.V(2).Info("MPS control daemon did not take quit, killing it", "pid", st.pid, "err", err)
	} else if waitGone(ctx, st.pid, st.start, m.timeout) {
		return nil
	}
	return m.kill(logger, st)
}

// kill SIGKILLs the daemon's process group (the daemon leads it, and the
// MPS servers it spawned are in it) and waits, bounded, until the daemon is
// gone. Only a daemon that is verified alive is signalled: once it is gone,
// its PID may belong to someone else.
func (m *Manager) kill(logger klog.Logger, st daemonState) error {
	if !alive(st.pid, st.start) {
		return nil
	}
	if err := syscall.Kill(-st.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill daemon PID %d: %w", st.pid, err)
	}
	// Not ctx: once killed, confirming it is gone is part of the job even
	// for a caller that gave up waiting.
	if !waitGone(context.Background(), st.pid, st.start, m.timeout) {
		return fmt.Errorf("daemon PID %d still runs %s after SIGKILL", st.pid, m.timeout)
	}
	logger.V(2).Info("Killed MPS control daemon", "pid", st.pid)
	return nil
}

// List reports every daemon the manager has a directory for, and every
// daemon process of its root found without one, with whether it runs.
func (m *Manager) List(ctx context.Context) ([]backend.MPSDaemonState, error) {
	logger := klog.FromContext(ctx)
	entries, err := os.ReadDir(m.root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("mps: list daemons: %w", err)
	}
	procs, err := scan(m.root)
	if err != nil {
		return nil, fmt.Errorf("mps: list daemons: %w", err)
	}
	if procs == nil {
		procs = []found{} // scanned, none: inspect must not scan again
	}
	seen := map[string]bool{}
	var out []backend.MPSDaemonState
	for _, e := range entries {
		if !e.IsDir() || validID(e.Name()) != nil {
			continue
		}
		st, err := m.inspect(logger.WithValues("mpsDaemon", e.Name()), e.Name(), procs)
		if err != nil {
			return nil, fmt.Errorf("mps: list daemons: %w", err)
		}
		seen[e.Name()] = true
		out = append(out, backend.MPSDaemonState{ID: e.Name(), Running: st.running})
	}
	for _, p := range procs {
		if !seen[p.id] {
			seen[p.id] = true
			out = append(out, backend.MPSDaemonState{ID: p.id, Running: true})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// daemonState is what inspect finds for one id.
type daemonState struct {
	rec      *record // nil: no record, or an unreadable one
	running  bool
	recorded bool // the running process is the record's PID
	pid      int
	start    uint64
	devices  []string // of the running process
}

// inspect finds the daemon of id: the record's PID if that process is
// alive, started when recorded, in this boot; else a process found by its
// environment (procs, or a fresh scan when nil), the oldest if several.
func (m *Manager) inspect(logger klog.Logger, id string, procs []found) (daemonState, error) {
	var st daemonState
	rec, err := readRecord(m.dir(id))
	if err != nil {
		// The process, if any, is still found by its environment.
		logger.Error(err, "Ignoring unreadable MPS daemon record")
	}
	st.rec = rec
	if rec != nil && rec.BootID == m.bootID && alive(rec.PID, rec.StartTime) {
		st.running, st.recorded, st.pid, st.start, st.devices = true, true, rec.PID, rec.StartTime, rec.Devices
		return st, nil
	}
	if procs == nil {
		if procs, err = scan(m.root); err != nil {
			return st, err
		}
	}
	for _, p := range procs {
		if p.id == id && (!st.running || p.start < st.start) {
			st.running, st.pid, st.start, st.devices = true, p.pid, p.start, p.devices
		}
	}
	return st, nil
}
