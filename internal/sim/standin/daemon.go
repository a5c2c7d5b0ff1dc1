package standin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// request and response are the wire format (see the package doc).
type request struct {
	Reply   string `json:"reply"`
	Command string `json:"command"`
}

type response struct {
	Output string `json:"output,omitempty"`
	Error  string `json:"error,omitempty"`
	// Code, with Error, is what Send wraps: codeNoDaemon, codeUnknownClient.
	Code string `json:"code,omitempty"`
}

// Daemon is a stand-in control daemon.
type Daemon struct {
	PipeDir, LogDir string
	// Devices is CUDA_VISIBLE_DEVICES, split.
	Devices []string
	// Protocol is 3 for MPS v3 (servers and namespaces), else legacy (2).
	Protocol int
	// ConfigFile is the v3 configuration file (-a), or "".
	ConfigFile string
	// Now is the clock, time.Now when nil; tests set it.
	Now func() time.Time

	status  Status
	log     *os.File
	reqs    chan incoming
	done    chan struct{}
	sockets map[string]*socket // by server/namespace; "" is the admin one
	clients []*client
	pidNS   string
	dirty   bool
}

// incoming is a request read from one of the daemon's sockets, or that
// socket's read error.
type incoming struct {
	req  request
	sock *socket
	err  error
}

func (d *Daemon) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// Run serves commands until quit (nil) or the end of ctx (ctx's error). It
// refuses to start where another daemon serves the pipe directory; a
// control FIFO a dead daemon left is replaced.
func (d *Daemon) Run(ctx context.Context) error {
	cfg, err := d.config()
	if err != nil {
		return err
	}
	for _, dir := range []string{d.PipeDir, d.LogDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	if d.log, err = os.OpenFile(filepath.Join(d.LogDir, LogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer d.log.Close()
	d.reqs = make(chan incoming)
	d.done = make(chan struct{})
	d.sockets = map[string]*socket{}
	// On quit or SIGTERM nobody may find a FIFO without a reader and take
	// it for a daemon; after SIGKILL the next daemon replaces it.
	defer d.closeSockets()
	defer close(d.done)
	if err := d.openSocket("", ""); err != nil {
		return err
	}

	d.pidNS = pidNamespace()
	d.status = Status{
		PID: os.Getpid(), Protocol: d.Protocol, Instance: newInstance(), Started: d.now(),
		Devices: slices.Clone(d.Devices), DefaultActiveThreadPercentage: 100, Commands: []string{},
	}
	if exe, err := os.Executable(); err == nil {
		d.status.Executable = exe
	}
	if d.Protocol == 3 {
		d.status.Servers = map[string]ServerStatus{}
		if cfg != nil {
			if err := d.startServers(cfg); err != nil {
				return err
			}
		}
	}
	if err := writeStatus(d.PipeDir, &d.status); err != nil {
		return err
	}
	pidFile := filepath.Join(d.PipeDir, PIDFile)
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return err
	}
	defer os.Remove(pidFile)
	d.logf("Starting control daemon, protocol %d, devices %s", d.Protocol, strings.Join(d.Devices, ","))

	// Clients in another PID namespace are dropped by ping age, which only
	// a request or this tick looks at.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case in := <-d.reqs:
			if in.err != nil {
				return fmt.Errorf("reading control FIFO %s: %w", in.sock.path, in.err)
			}
			if d.serve(in) {
				d.logf("Exiting on quit")
				return nil
			}
		case <-ctx.Done():
			d.logf("Exiting: %v", context.Cause(ctx))
			return ctx.Err()
		case <-tick.C:
			d.prune(d.now())
			d.save()
		}
	}
}

// config checks the daemon's settings, the protocol defaulting to legacy
// MPS (2), and loads its configuration file (MPS v3 only), nil without one.
func (d *Daemon) config() (*Config, error) {
	if d.PipeDir == "" || d.LogDir == "" {
		return nil, errors.New("the pipe and log directories must be set (CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_LOG_DIRECTORY)")
	}
	if d.Protocol != 3 {
		d.Protocol = 2
	}
	if d.ConfigFile == "" {
		return nil, nil
	}
	if d.Protocol != 3 {
		return nil, fmt.Errorf("configuration file %s needs protocol 3 (-p 3)", d.ConfigFile)
	}
	return LoadConfig(d.ConfigFile, d.Devices)
}

// serve runs one request, answers it and says whether it was quit.
func (d *Daemon) serve(in incoming) (quit bool) {
	cmd := in.req.Command
	d.prune(d.now())
	var out string
	var err error
	if !in.sock.live {
		// Read before its namespace was deleted: nobody serves it now.
		err = &codedError{code: codeNoDaemon, msg: "namespace " + in.sock.name() + " was deleted"}
	} else {
		out, quit, err = d.handle(in.sock, cmd)
	}
	// Pings would swamp the record and the log; they change nothing a
	// reader of either needs.
	if !isPing(cmd) {
		d.status.Commands = append(d.status.Commands, cmd)
		d.status.Quit = quit
		d.dirty = true
		where := ""
		if !in.sock.admin() {
			where = " on " + in.sock.name()
		}
		if err != nil {
			d.logf("Cmd%s: %s: %v", where, cmd, err)
		} else {
			d.logf("Cmd%s: %s", where, cmd)
		}
	}
	if werr := d.save(); werr != nil && err == nil {
		err = fmt.Errorf("saving status: %w", werr)
	}
	resp := response{Output: out}
	if err != nil {
		resp.Error = err.Error()
		var ce *codedError
		if errors.As(err, &ce) {
			resp.Code = ce.code
		}
	}
	reply(filepath.Dir(in.sock.path), in.req.Reply, resp)
	return quit
}

// save writes the status when it changed.
func (d *Daemon) save() error {
	if !d.dirty {
		return nil
	}
	d.dirty = false
	d.status.Clients = d.clientStatus()
	return writeStatus(d.PipeDir, &d.status)
}

// handle runs one command read from sock and says whether it was quit.
func (d *Daemon) handle(sock *socket, command string) (out string, quit bool, err error) {
	f := strings.Fields(command)
	if len(f) == 0 {
		return "", false, errors.New("empty command")
	}
	if f[0] == moduleClient {
		out, err := d.clientCommand(sock, f[1:])
		return out, false, err
	}
	if !sock.admin() {
		return "", false, fmt.Errorf("%q is not allowed on a namespace socket (%s): only client commands are", f[0], sock.name())
	}
	if d.Protocol == 3 {
		return d.handleV3(f)
	}
	return d.handleLegacy(f)
}

// claimFIFO makes the control FIFO at path, replacing one no daemon reads.
func claimFIFO(path string) error {
	w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	switch {
	case err == nil:
		// Opening for writing without blocking succeeds only with a reader.
		w.Close()
		return fmt.Errorf("another control daemon serves %s", filepath.Dir(path))
	case errors.Is(err, syscall.ENXIO):
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("remove stale control FIFO: %w", err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("check control FIFO: %w", err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		return fmt.Errorf("make control FIFO %s: %w", path, err)
	}
	return nil
}

// reply answers on the client's FIFO. A client that gave up (its FIFO
// gone, or no reader) is not the daemon's problem.
//
// The request names its reply FIFO by base name, in the directory of the
// socket it came through: the client and the daemon see that directory at
// different paths (a container mounts a namespace's directory at its own
// CUDA_MPS_PIPE_DIRECTORY), and a tenant must not make the daemon write
// anywhere else, so a name with a slash, or what is not a FIFO, gets no
// answer.
func reply(sockDir, name string, resp response) {
	if name == "" || strings.ContainsRune(name, '/') || name == "." || name == ".." {
		return
	}
	path := filepath.Join(sockDir, name)
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		return
	}
	w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return
	}
	defer w.Close()
	data, _ := json.Marshal(resp)
	_ = w.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = w.Write(append(data, '\n'))
}

var memLimit = regexp.MustCompile(`^[0-9]+[MG]$`)

// handleLegacy runs a protocol 2 command and says whether it was quit.
func (d *Daemon) handleLegacy(f []string) (out string, quit bool, err error) {
	args := f[1:]
	nargs := func(n int) error {
		if len(args) != n {
			return fmt.Errorf("%s takes %d argument(s), got %d", f[0], n, len(args))
		}
		return nil
	}
	switch f[0] {
	case "quit":
		if err := nargs(0); err != nil {
			return "", false, err
		}
		return "", true, nil
	case "get_server_list":
		return "", false, nargs(0)
	case "get_default_active_thread_percentage":
		if err := nargs(0); err != nil {
			return "", false, err
		}
		return strconv.FormatFloat(d.status.DefaultActiveThreadPercentage, 'f', 1, 64), false, nil
	case "set_default_active_thread_percentage":
		if err := nargs(1); err != nil {
			return "", false, err
		}
		p, err := strconv.ParseFloat(args[0], 64)
		if err != nil || p <= 0 || p > 100 {
			return "", false, fmt.Errorf("active thread percentage %q is not within (0, 100]", args[0])
		}
		d.status.DefaultActiveThreadPercentage = p
		return "", false, nil
	case "set_default_device_pinned_mem_limit":
		if err := nargs(2); err != nil {
			return "", false, err
		}
		if err := d.device(args[0]); err != nil {
			return "", false, err
		}
		if !memLimit.MatchString(args[1]) {
			return "", false, fmt.Errorf("pinned memory limit %q is not an integer followed by M or G", args[1])
		}
		if d.status.DefaultPinnedMemLimits == nil {
			d.status.DefaultPinnedMemLimits = map[string]string{}
		}
		d.status.DefaultPinnedMemLimits[args[0]] = args[1]
		return "", false, nil
	case "get_default_device_pinned_mem_limit":
		if err := nargs(1); err != nil {
			return "", false, err
		}
		if err := d.device(args[0]); err != nil {
			return "", false, err
		}
		if v, ok := d.status.DefaultPinnedMemLimits[args[0]]; ok {
			return v, false, nil
		}
		return "0M", false, nil
	}
	return "", false, fmt.Errorf("unknown command %q", f[0])
}

// device checks that dev is one of the daemon's devices, by UUID or index.
func (d *Daemon) device(dev string) error {
	if slices.Contains(d.Devices, dev) {
		return nil
	}
	if i, err := strconv.Atoi(dev); err == nil && i >= 0 && i < len(d.Devices) {
		return nil
	}
	return fmt.Errorf("device %q is not visible to the daemon (CUDA_VISIBLE_DEVICES=%s)", dev, strings.Join(d.Devices, ","))
}

func (d *Daemon) logf(format string, args ...any) {
	fmt.Fprintf(d.log, "[%s %d] %s\n", time.Now().Format("2006-01-02 15:04:05.000"), os.Getpid(), fmt.Sprintf(format, args...))
}
