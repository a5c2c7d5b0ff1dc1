package standin

import (
	"bufio"
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
}

// Daemon is a stand-in control daemon.
type Daemon struct {
	PipeDir, LogDir string
	// Devices is CUDA_VISIBLE_DEVICES, split.
	Devices []string

	status Status
	log    *os.File
}

// Run serves commands until quit (nil) or the end of ctx (ctx's error). It
// refuses to start where another daemon serves the pipe directory; a
// control FIFO a dead daemon left is replaced.
func (d *Daemon) Run(ctx context.Context) error {
	if d.PipeDir == "" || d.LogDir == "" {
		return errors.New("the pipe and log directories must be set (CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_LOG_DIRECTORY)")
	}
	for _, dir := range []string{d.PipeDir, d.LogDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	var err error
	if d.log, err = os.OpenFile(filepath.Join(d.LogDir, LogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer d.log.Close()
	ctl := filepath.Join(d.PipeDir, ControlFIFO)
	if err := claimFIFO(ctl); err != nil {
		return err
	}
	// On quit or SIGTERM nobody may find a FIFO without a reader and take
	// it for a daemon; after SIGKILL the next daemon replaces it.
	defer os.Remove(ctl)
	// Read and write: the daemon holds a writer itself, so it never reads
	// EOF between clients and the open does not wait for one.
	f, err := os.OpenFile(ctl, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open control FIFO: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { f.Close() })
	defer stop()
	defer f.Close()

	d.status = Status{PID: os.Getpid(), Devices: slices.Clone(d.Devices), DefaultActiveThreadPercentage: 100, Commands: []string{}}
	if err := writeStatus(d.PipeDir, &d.status); err != nil {
		return err
	}
	pidFile := filepath.Join(d.PipeDir, PIDFile)
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return err
	}
	defer os.Remove(pidFile)
	d.logf("Starting control daemon, devices %s", strings.Join(d.Devices, ","))

	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var req request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			d.logf("Malformed request %q: %v", sc.Text(), err)
			continue
		}
		out, quit, err := d.handle(req.Command)
		d.status.Commands = append(d.status.Commands, req.Command)
		d.status.Quit = quit
		if werr := writeStatus(d.PipeDir, &d.status); werr != nil && err == nil {
			err = fmt.Errorf("saving status: %w", werr)
		}
		resp := response{Output: out}
		if err != nil {
			resp.Error = err.Error()
			d.logf("Cmd: %s: %v", req.Command, err)
		} else {
			d.logf("Cmd: %s", req.Command)
		}
		reply(req.Reply, resp)
		if quit {
			d.logf("Exiting on quit")
			return nil
		}
	}
	if ctx.Err() != nil {
		d.logf("Exiting: %v", context.Cause(ctx))
		return ctx.Err()
	}
	return fmt.Errorf("reading control FIFO: %w", sc.Err())
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
func reply(path string, resp response) {
	if path == "" {
		return
	}
	w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	defer w.Close()
	data, _ := json.Marshal(resp)
	_ = w.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = w.Write(append(data, '\n'))
}

var memLimit = regexp.MustCompile(`^[0-9]+[MG]$`)

// handle runs one command and says whether it was quit.
func (d *Daemon) handle(command string) (out string, quit bool, err error) {
	f := strings.Fields(command)
	if len(f) == 0 {
		return "", false, errors.New("empty command")
	}
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
