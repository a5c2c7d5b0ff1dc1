package imexstandin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// proto starts every line of the peers' wire (see the package doc).
const proto = "TESSERA-IMEX-SIM/1"

// helloTimeout bounds connecting and the hello exchange, so that a peer
// that accepts and says nothing cannot hold a dialer.
const helloTimeout = 2 * time.Second

// refusedFault is the refusal of a daemon with an injected fault.
const refusedFault = "injected fault"

// dialLoop keeps a link to peer until ctx ends: it connects, holds the
// link until it is lost, and tries again after a backoff that doubles
// from MinBackoff to MaxBackoff while attempts fail. A peer connecting to
// us cuts the backoff short; while a fault is injected it does not dial.
func (d *Daemon) dialLoop(ctx context.Context, peer string) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "peer", peer)
	backoff := d.MinBackoff
	for {
		epoch, resumed := d.state.current()
		if epoch == nil {
			select {
			case <-ctx.Done():
				return
			case <-resumed:
				continue
			}
		}
		held, err := d.linkTo(klog.NewContext(epoch, logger), peer)
		if ctx.Err() != nil {
			return
		}
		if held {
			backoff = d.MinBackoff
		} else {
			logger.V(4).Info("Connecting to IMEX peer failed; retrying", "err", err.Error(), "backoff", backoff)
		}
		select {
		case <-ctx.Done():
			return
		case <-d.state.kicks(peer):
			backoff = d.MinBackoff
		case <-time.After(backoff):
			backoff = min(2*backoff, d.MaxBackoff)
		}
	}
}

// linkTo connects to peer and holds the link until either side closes it
// or epoch ends. held says whether the peer accepted.
func (d *Daemon) linkTo(epoch context.Context, peer string) (held bool, err error) {
	logger := klog.FromContext(epoch)
	dialer := net.Dialer{Timeout: helloTimeout}
	// Connect from our own address, as a real tray has only its own.
	if ip := net.ParseIP(d.self); ip != nil {
		dialer.LocalAddr = &net.TCPAddr{IP: ip}
	}
	conn, err := dialer.DialContext(epoch, "tcp", net.JoinHostPort(peer, strconv.Itoa(d.cfg.ServerPort)))
	if err != nil {
		d.state.set(peer, false, "")
		return false, err
	}
	defer conn.Close()
	stop := context.AfterFunc(epoch, func() { conn.Close() })
	defer stop()
	_ = conn.SetDeadline(time.Now().Add(helloTimeout))
	r := bufio.NewReader(conn)
	answer, err := hello(conn, r, d.self, d.hash)
	if err != nil {
		d.state.set(peer, false, "")
		return false, err
	}
	if refused, ok := strings.CutPrefix(answer, "REFUSED "); ok {
		if d.state.newRefusal("out", peer, refused) {
			logger.Info("IMEX peer refused us", "reason", refused)
		}
		d.state.set(peer, false, refused)
		return false, fmt.Errorf("refused: %s", refused)
	}
	if answer != "OK "+peer {
		d.state.set(peer, false, "")
		return false, fmt.Errorf("answered %q, want OK %s", answer, peer)
	}
	_ = conn.SetDeadline(time.Time{})
	d.state.set(peer, true, "")
	d.state.newRefusal("out", peer, "")
	logger.Info("Connected to IMEX peer")
	// The peer sends nothing more: a read ends only when the link does.
	_, _ = io.Copy(io.Discard, r)
	d.state.set(peer, false, "")
	if epoch.Err() == nil {
		logger.Info("Lost IMEX peer")
	}
	return true, nil
}

// hello sends our hello on conn and returns the peer's answer without
// the protocol word.
func hello(conn net.Conn, r *bufio.Reader, self, hash string) (string, error) {
	if _, err := fmt.Fprintf(conn, "%s HELLO %s %s\n", proto, self, hash); err != nil {
		return "", err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("reading the answer to hello: %w", err)
	}
	answer, ok := strings.CutPrefix(strings.TrimSpace(line), proto+" ")
	if !ok {
		return "", fmt.Errorf("not an IMEX stand-in: answered %q", line)
	}
	return answer, nil
}

// accept serves each peer connecting to ln until ln is closed.
func (d *Daemon) accept(ctx context.Context, ln net.Listener, wg *sync.WaitGroup) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				klog.FromContext(ctx).Error(err, "Accepting IMEX peers; no longer accepting")
			}
			return
		}
		wg.Go(func() { d.serveInbound(ctx, conn) })
	}
}

// serveInbound answers a peer's hello and holds the link until either
// side closes it or the epoch ends; a peer whose hello we cannot accept
// is refused and logged (once per reason).
func (d *Daemon) serveInbound(ctx context.Context, conn net.Conn) {
	defer conn.Close()
	// Close it when the daemon stops, even mid-hello.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	_ = conn.SetDeadline(time.Now().Add(helloTimeout))
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return
	}
	peer, reason := d.judge(strings.Fields(line))
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "peer", peer, "remote", conn.RemoteAddr().String())
	epoch, _ := d.state.current()
	if reason == "" && epoch == nil {
		reason = refusedFault
	}
	if reason != "" {
		if d.state.newRefusal("in", peer, reason) {
			logger.Info("Refusing IMEX peer", "reason", reason)
		}
		fmt.Fprintf(conn, "%s REFUSED %s\n", proto, reason)
		return
	}
	d.state.newRefusal("in", peer, "")
	if _, err := fmt.Fprintf(conn, "%s OK %s\n", proto, d.self); err != nil {
		return
	}
	_ = conn.SetDeadline(time.Time{})
	stopEpoch := context.AfterFunc(epoch, func() { conn.Close() })
	defer stopEpoch()
	// It has just come up: connect back now rather than after a backoff.
	d.state.kick(peer)
	logger.V(2).Info("IMEX peer connected to us")
	_, _ = io.Copy(io.Discard, r)
}

// judge reads a hello's fields and returns the peer it names and why it
// is refused, "" when it is not.
func (d *Daemon) judge(f []string) (peer, reason string) {
	if len(f) != 4 || f[0] != proto || f[1] != "HELLO" {
		return "", fmt.Sprintf("not a %s hello", proto)
	}
	peer = f[2]
	switch {
	case f[3] != d.hash:
		return peer, fmt.Sprintf("nodes list differs (%s's hashes to %s, %s's to %s)", d.self, d.hash, peer, f[3])
	case peer == d.self || !slices.Contains(d.peers, peer):
		return peer, fmt.Sprintf("%s is no other peer of %s's nodes list", peer, d.self)
	}
	return peer, ""
}
