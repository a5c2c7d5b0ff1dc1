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
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrNoDaemon is wrapped by Send's error when no daemon serves the pipe
// directory.
var ErrNoDaemon = errors.New("no MPS control daemon is running")

// ErrUnknownClient is wrapped by Send's error when the daemon has no
// session of the client: it never connected, or its namespace was deleted,
// or another daemon runs now.
var ErrUnknownClient = errors.New("unknown MPS client")

// pipeBuf is POSIX's PIPE_BUF on Linux: writes up to it are atomic.
const pipeBuf = 4096

var replySeq atomic.Uint64

// Send sends one command to the daemon of pipeDir and returns its answer.
// It gives up when ctx ends.
func Send(ctx context.Context, pipeDir, command string) (string, error) {
	w, err := os.OpenFile(filepath.Join(pipeDir, ControlFIFO), os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ENXIO) || errors.Is(err, fs.ErrNotExist) {
		// ENXIO: the FIFO exists but nobody reads it, a dead daemon's.
		return "", fmt.Errorf("%w in %s", ErrNoDaemon, pipeDir)
	}
	if err != nil {
		return "", fmt.Errorf("open control FIFO: %w", err)
	}
	defer w.Close()

	replyPath := filepath.Join(pipeDir, ".reply-"+strconv.Itoa(os.Getpid())+"-"+strconv.FormatUint(replySeq.Add(1), 10))
	if err := syscall.Mkfifo(replyPath, 0o600); err != nil {
		return "", fmt.Errorf("make reply FIFO: %w", err)
	}
	defer os.Remove(replyPath)
	// Read and write, so the open does not wait for the daemon and no EOF
	// comes before its answer.
	r, err := os.OpenFile(replyPath, os.O_RDWR, 0)
	if err != nil {
		return "", fmt.Errorf("open reply FIFO: %w", err)
	}
	defer r.Close()
	stop := context.AfterFunc(ctx, func() {
		past := time.Unix(1, 0)
		_ = w.SetWriteDeadline(past)
		_ = r.SetReadDeadline(past)
	})
	defer stop()

	// By base name: the daemon finds it beside the socket, wherever it
	// sees that directory (reply).
	line, err := json.Marshal(request{Reply: filepath.Base(replyPath), Command: command})
	if err != nil {
		return "", err
	}
	line = append(line, '\n')
	if len(line) > pipeBuf {
		return "", fmt.Errorf("command of %d bytes is too long", len(command))
	}
	if _, err := w.Write(line); err != nil {
		return "", fmt.Errorf("send %q: %w", command, ctxErr(ctx, err))
	}
	sent := make(chan struct{})
	defer close(sent)
	gone := watchDaemon(w, r, sent)
	br := bufio.NewReader(r)
	data, err := br.ReadBytes('\n')
	if err != nil && ctx.Err() == nil {
		select {
		case <-gone:
			// An answer written before the daemon went is in the FIFO.
			_ = r.SetReadDeadline(time.Now().Add(daemonCheck))
			var rest []byte
			if rest, err = br.ReadBytes('\n'); err != nil {
				return "", fmt.Errorf("answer to %q: %w in %s: it went away", command, ErrNoDaemon, pipeDir)
			}
			data = append(data, rest...)
		default:
		}
	}
	if err != nil {
		return "", fmt.Errorf("answer to %q: %w", command, ctxErr(ctx, err))
	}
	return decodeAnswer(command, pipeDir, data)
}

// watchDaemon closes the returned channel, and cuts the wait on r short,
// once the daemon behind w stops serving before sent closes: a daemon that
// dies before it answers never will, and a client of a dead daemon must
// know it sooner than its context ends.
func watchDaemon(w, r *os.File, sent <-chan struct{}) <-chan struct{} {
	gone := make(chan struct{})
	go func() {
		t := time.NewTicker(daemonCheck)
		defer t.Stop()
		for {
			select {
			case <-sent:
				return
			case <-t.C:
			}
			if !serving(w) {
				close(gone)
				_ = r.SetReadDeadline(time.Unix(1, 0))
				return
			}
		}
	}()
	return gone
}

// decodeAnswer is the daemon's answer line to command: its output, and
// its error as the error kinds a caller tells apart.
func decodeAnswer(command, pipeDir string, data []byte) (string, error) {
	var resp response
	if err := json.Unmarshal(data, &resp); err != nil {
		return "", fmt.Errorf("answer to %q: %w", command, err)
	}
	switch {
	case resp.Code == codeNoDaemon:
		return resp.Output, fmt.Errorf("%s: %w in %s (%s)", command, ErrNoDaemon, pipeDir, resp.Error)
	case resp.Code == codeUnknownClient:
		return resp.Output, fmt.Errorf("%w: %s", ErrUnknownClient, resp.Error)
	case resp.Error != "":
		return resp.Output, fmt.Errorf("%s: %s", command, resp.Error)
	}
	return resp.Output, nil
}

// daemonCheck is how often Send checks, while it waits for an answer,
// that a daemon still reads the FIFO it sent to.
const daemonCheck = 50 * time.Millisecond

// serving says whether the control FIFO open as w is still at its path and
// read: a daemon killed leaves it without a reader, a daemon that quit
// removes it, the next daemon replaces it.
func serving(w *os.File) bool {
	open, err := w.Stat()
	if err != nil {
		return true
	}
	now, err := os.Stat(w.Name())
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist)
	}
	if !os.SameFile(open, now) {
		return false
	}
	probe, err := os.OpenFile(w.Name(), os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return !errors.Is(err, syscall.ENXIO)
	}
	probe.Close()
	return true
}

// ctxErr prefers ctx's reason to the deadline error it caused.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return err
}
