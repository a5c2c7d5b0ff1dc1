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
	"time"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/host"
	"github.com/tessera-gpu/tessera/internal/keyed"
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
	// own (internal/sim) passes its own.
	BootID string
	// Launcher runs the daemon processes; nil means ProcessLauncher, the
	// agent's own detached children.
	Launcher Launcher
	// LibraryPath is the daemons' LD_LIBRARY_PATH (the driver root's
	// library directory, where the MPS server finds libcuda); empty: not
	// set.
	LibraryPath string
	// Protocol is the MPS protocol the daemons run: Protocol3 (MPS v3,
	// namespaces; drivers r615+) or 0 for legacy MPS.
	Protocol int
}

// Manager starts, adopts, lists and stops the MPS control daemons under one
// root. It is safe for concurrent use: calls for one id are serialised,
// calls for different ids run in parallel.
type Manager struct {
	root     string
	control  []string
	logger   klog.Logger
	timeout  time.Duration
	bootID   string
	run      Launcher
	protocol int
	// libraryPath: Config.LibraryPath.
	libraryPath string
	locks       keyed.Mutex
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
	m := &Manager{root: root, control: slices.Clone(c.Control), logger: c.Logger, timeout: c.Timeout, bootID: boot, run: c.Launcher, protocol: c.Protocol, libraryPath: c.LibraryPath}
	if m.protocol != 0 && m.protocol != 2 && m.protocol != Protocol3 {
		return nil, fmt.Errorf("mps: protocol %d is neither legacy MPS (2) nor MPS v3 (3)", c.Protocol)
	}
	if m.timeout <= 0 {
		m.timeout = DefaultTimeout
	}
	if m.run == nil {
		m.run = &ProcessLauncher{Logger: c.Logger, Timeout: m.timeout}
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
func (m *Manager) Start(ctx context.Context, spec DaemonSpec) (*Daemon, error) {
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

func (m *Manager) start(ctx context.Context, logger klog.Logger, spec DaemonSpec) (*Daemon, error) {
	dir, pipe, logs := m.dir(spec.ID), pipeDir(m.root, spec.ID), logDir(m.root, spec.ID)
	st, err := m.inspect(ctx, logger, spec.ID, nil)
	if err != nil {
		return nil, err
	}
	out := &Daemon{ID: spec.ID, PipeDir: pipe, LogDir: logs, ClientDir: pipe}
	if m.protocol == Protocol3 {
		out.Namespaces, out.ClientDir = true, namespaceDir(m.root, spec.ID, defaultNamespace)
	}
	switch {
	case st.running && slices.Equal(st.devices, spec.Devices):
		return m.adopt(ctx, logger, spec, st, out)
	case st.running:
		logger.Info("MPS control daemon serves other devices, replacing it", "daemon", st.handle, "devices", st.devices, "want", spec.Devices)
		if err := m.stopDaemon(ctx, logger, pipe, st); err != nil {
			return nil, err
		}
	case st.rec != nil:
		logger.V(2).Info("MPS control daemon recorded but not running, starting it anew", "daemon", st.rec.Handle)
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
	if m.protocol == Protocol3 {
		if err := writeV3Config(dir, spec); err != nil {
			m.discard(logger, dir)
			return nil, err
		}
	}
	h, err := m.run.Launch(ctx, m.launchOf(spec))
	if err != nil {
		m.discard(logger, dir)
		return nil, err
	}
	launched := daemonState{rec: rec, running: true, recorded: true, handle: h, devices: spec.Devices}
	rec.Handle = h
	err = writeRecord(dir, rec)
	if err == nil {
		err = m.apply(ctx, spec, pipe, m.gone(h))
	}
	if err != nil {
		err = fmt.Errorf("daemon %s: %w%s", h, err, logTail(logs))
		if kerr := m.kill(ctx, logger, launched); kerr != nil {
			// The record stays, so Stop or the next Start finds it.
			return nil, fmt.Errorf("%w (and %v)", err, kerr)
		}
		m.discard(logger, dir)
		return nil, err
	}
	logger.V(1).Info("Started MPS control daemon", "daemon", h, "devices", spec.Devices, "pipeDir", pipe)
	out.PID = h.PID
	return out, nil
}

// adopt takes over the running daemon st, which serves spec's devices:
// its record written again where a crash between launch and record lost
// it, spec's defaults applied again.
func (m *Manager) adopt(ctx context.Context, logger klog.Logger, spec DaemonSpec, st daemonState, out *Daemon) (*Daemon, error) {
	dir := m.dir(spec.ID)
	if !st.recorded {
		rec := &record{ID: spec.ID, Devices: slices.Clone(spec.Devices), BootID: m.bootID, Handle: st.handle}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create daemon directory: %w", err)
		}
		if err := writeRecord(dir, rec); err != nil {
			return nil, err
		}
	}
	if err := m.apply(ctx, spec, pipeDir(m.root, spec.ID), m.gone(st.handle)); err != nil {
		return nil, fmt.Errorf("adopted daemon (%s): %w", st.handle, err)
	}
	logger.V(2).Info("Adopted running MPS control daemon", "daemon", st.handle)
	out.PID, out.Adopted = st.handle.PID, true
	return out, nil
}

// launchOf is what the launcher is asked to run for spec.
func (m *Manager) launchOf(spec DaemonSpec) Launch {
	pipe, logs := pipeDir(m.root, spec.ID), logDir(m.root, spec.ID)
	env := map[string]string{
		envVisibleDevices: strings.Join(spec.Devices, ","),
		envPipeDir:        pipe,
		envLogDir:         logs,
		EnvDaemonID:       spec.ID,
	}
	if m.libraryPath != "" {
		env[EnvLibraryPath] = m.libraryPath
	}
	return Launch{
		ID:      spec.ID,
		Argv:    m.argv(spec.ID),
		Env:     env,
		Dir:     m.dir(spec.ID),
		Output:  filepath.Join(logs, daemonOut),
		Devices: slices.Clone(spec.Devices),
	}
}

// argv is the daemon's command line.
func (m *Manager) argv(id string) []string {
	if m.protocol == Protocol3 {
		return m.v3Argv(id)
	}
	return append(slices.Clone(m.control), "-f")
}

// gone is apply's test that the daemon h died, so waiting for it to answer
// is pointless.
func (m *Manager) gone(h Handle) func() bool {
	return func() bool { return !m.run.Alive(context.Background(), h) }
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
	st, err := m.inspect(ctx, logger, id, nil)
	if err != nil {
		return fmt.Errorf("mps: stop daemon %s: %w", id, err)
	}
	if err := m.stopDaemon(ctx, logger, pipeDir(m.root, id), st); err != nil {
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
	logger.V(1).Info("Stopped MPS control daemon", "daemon", st.handle)
	return nil
}

// stopDaemon asks a running daemon to quit, waits (bounded), then kills it.
func (m *Manager) stopDaemon(ctx context.Context, logger klog.Logger, pipe string, st daemonState) error {
	if !st.running {
		return nil
	}
	if _, err := m.send(ctx, pipe, cmdQuit); err != nil {
		logger.V(2).Info("MPS control daemon did not take quit, killing it", "daemon", st.handle, "err", err)
	} else if !waitGone(ctx, func() bool { return m.run.Alive(ctx, st.handle) }, m.timeout) {
		logger.V(2).Info("MPS control daemon did not exit after quit, killing it", "daemon", st.handle)
	}
	// Even after a clean quit: the launcher removes what it made (a
	// finished daemon pod stays otherwise); for a gone process it is a
	// no-op.
	return m.kill(ctx, logger, st)
}

// kill has the launcher kill the daemon at once.
func (m *Manager) kill(ctx context.Context, logger klog.Logger, st daemonState) error {
	// Not ctx's cancellation: once a kill is due, it is part of the job even
	// for a caller that gave up waiting.
	if err := m.run.Kill(context.WithoutCancel(ctx), st.handle); err != nil {
		return err
	}
	logger.V(2).Info("Killed MPS control daemon", "daemon", st.handle)
	return nil
}

// List reports every daemon the manager has a directory for, and every
// daemon the launcher finds without one, with whether it runs.
func (m *Manager) List(ctx context.Context) ([]DaemonState, error) {
	logger := klog.FromContext(ctx)
	entries, err := os.ReadDir(m.root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("mps: list daemons: %w", err)
	}
	found, err := m.run.Find(ctx, m.root)
	if err != nil {
		return nil, fmt.Errorf("mps: list daemons: %w", err)
	}
	if found == nil {
		found = []Found{} // looked, none: inspect must not look again
	}
	seen := map[string]bool{}
	var out []DaemonState
	for _, e := range entries {
		if !e.IsDir() || validID(e.Name()) != nil {
			continue
		}
		st, err := m.inspect(ctx, logger.WithValues("mpsDaemon", e.Name()), e.Name(), found)
		if err != nil {
			return nil, fmt.Errorf("mps: list daemons: %w", err)
		}
		seen[e.Name()] = true
		out = append(out, DaemonState{ID: e.Name(), Running: st.running})
	}
	for _, f := range found {
		if !seen[f.ID] {
			seen[f.ID] = true
			out = append(out, DaemonState{ID: f.ID, Running: true})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// daemonState is what inspect finds for one id.
type daemonState struct {
	rec      *record // nil: no record, or an unreadable one
	running  bool
	recorded bool // the running daemon is the record's
	handle   Handle
	devices  []string // of the running daemon
}

// inspect finds the daemon of id: the record's if it is alive and was
// recorded in this boot; else one the launcher finds (found, or a fresh
// Find when nil), the oldest if several.
func (m *Manager) inspect(ctx context.Context, logger klog.Logger, id string, found []Found) (daemonState, error) {
	var st daemonState
	rec, err := readRecord(m.dir(id))
	if err != nil {
		// The daemon, if any, is still found by the launcher.
		logger.Error(err, "Ignoring unreadable MPS daemon record")
	}
	st.rec = rec
	if rec != nil && rec.BootID == m.bootID && !rec.Handle.IsZero() && m.run.Alive(ctx, rec.Handle) {
		st.running, st.recorded, st.handle, st.devices = true, true, rec.Handle, rec.Devices
		return st, nil
	}
	if found == nil {
		if found, err = m.run.Find(ctx, m.root); err != nil {
			return st, err
		}
	}
	for _, f := range found {
		if f.ID == id {
			st.running, st.handle, st.devices = true, f.Handle, f.Devices
			break
		}
	}
	return st, nil
}
