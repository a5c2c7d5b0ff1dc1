package standin

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"

	"encoding/json"
	"path/filepath"
)

// socket is one control FIFO the daemon reads: the admin one in the pipe
// directory (server "") or a v3 namespace's.
type socket struct {
	server, namespace string
	// path is the FIFO; more than one may serve a namespace (a server's
	// own listener is its default namespace's).
	path string
	f    *os.File
	// live is false once the daemon stopped serving it; only the daemon's
	// loop reads or writes it.
	live bool
}

func (s *socket) admin() bool { return s.server == "" }

// name is "<server>/<namespace>", or "" for the admin socket.
func (s *socket) name() string {
	if s.admin() {
		return ""
	}
	return s.server + "/" + s.namespace
}

// socketDir is the directory of the FIFO serving server/namespace; a
// server's listener is <server>/control.
func (d *Daemon) socketDir(server, namespace string) string {
	if server == "" {
		return d.PipeDir
	}
	if namespace == "" {
		return filepath.Join(d.PipeDir, server)
	}
	return filepath.Join(d.PipeDir, server, namespace)
}

// socketKey indexes d.sockets; namespace "" is the server's listener.
func socketKey(server, namespace string) string {
	if server == "" {
		return ""
	}
	return server + "/" + namespace
}

// openSocket makes the FIFO for server/namespace (namespace "" being the
// server's listener, of its default namespace) and starts reading it.
func (d *Daemon) openSocket(server, namespace string) error {
	dir := d.socketDir(server, namespace)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	path := filepath.Join(dir, ControlFIFO)
	if err := claimFIFO(path); err != nil {
		return err
	}
	// Read and write: the daemon holds a writer itself, so it never reads
	// EOF between clients and the open does not wait for one.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("open control FIFO %s: %w", path, err)
	}
	s := &socket{server: server, namespace: namespace, path: path, f: f, live: true}
	if namespace == "" && server != "" {
		s.namespace = DefaultNamespace
	}
	d.sockets[socketKey(server, namespace)] = s
	go d.listen(s)
	return nil
}

// listen hands each request read from s to the daemon's loop, and the
// read's error unless the daemon closed s.
func (d *Daemon) listen(s *socket) {
	sc := bufio.NewScanner(s.f)
	for sc.Scan() {
		var req request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			d.logf("Malformed request %q: %v", sc.Text(), err)
			continue
		}
		select {
		case d.reqs <- incoming{req: req, sock: s}:
		case <-d.done:
			return
		}
	}
	err := sc.Err()
	if errors.Is(err, os.ErrClosed) {
		return
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	select {
	case d.reqs <- incoming{sock: s, err: err}:
	case <-d.done:
	}
}

// closeSocket stops serving the socket with key and removes its FIFO.
func (d *Daemon) closeSocket(key string) error {
	s, ok := d.sockets[key]
	if !ok {
		return nil
	}
	delete(d.sockets, key)
	s.live = false
	s.f.Close()
	if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove control FIFO: %w", err)
	}
	return nil
}

// closeSockets removes every FIFO the daemon made; their directories stay,
// for a next daemon to serve where clients' mounts point.
func (d *Daemon) closeSockets() {
	for _, key := range slices.Sorted(maps.Keys(d.sockets)) {
		_ = d.closeSocket(key)
	}
}

// Codes a response carries, for Send to wrap the matching error.
const (
	codeNoDaemon      = "no-daemon"
	codeUnknownClient = "unknown-client"
)

// codedError is a command's error with a response code.
type codedError struct{ code, msg string }

func (e *codedError) Error() string { return e.msg }
