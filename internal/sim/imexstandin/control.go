package imexstandin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

// ErrNoDaemon is wrapped by Query's error when no daemon answers.
var ErrNoDaemon = errors.New("no IMEX daemon answers")

// controlTimeout bounds writing a status line to a client that does not
// read, so that one client cannot hold the command service.
const controlTimeout = time.Second

// status is the daemon's status line, as imex-ctl -q prints it; only
// while Run runs.
func (d *Daemon) status() string {
	return d.state.status(d.cfg.WaitForQuorum, len(d.peers))
}

// serveControl writes the status line to each client of ln until ln is
// closed.
func (d *Daemon) serveControl(ctx context.Context, ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				klog.FromContext(ctx).Error(err, "Accepting IMEX command clients; no longer serving the status")
			}
			return
		}
		_ = conn.SetWriteDeadline(time.Now().Add(controlTimeout))
		_, _ = io.WriteString(conn, d.status()+"\n")
		conn.Close()
	}
}

// Query reads the status line of the daemon serving socket (its
// IMEX_CMD_UNIX_DOMAIN_PATH).
func Query(ctx context.Context, socket string) (string, error) {
	var dialer net.Dialer
	conn, err := dialer.DialContext(ctx, "unix", socket)
	if err != nil {
		return "", fmt.Errorf("%w on %s: %w", ErrNoDaemon, socket, err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	data, err := io.ReadAll(conn)
	if err == nil && len(data) == 0 {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return "", fmt.Errorf("reading the IMEX daemon's status on %s: %w", socket, err)
	}
	return strings.TrimSpace(string(data)), nil
}
