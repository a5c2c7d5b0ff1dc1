package claims

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/channelpool"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
)

// Where the agent runs the node's IMEX daemon itself (--imex-daemons=pod),
// the claims of IMEX channels decide when it runs: the first prepare of a
// channel starts it and waits a while for it to be ready, and the
// unprepare of the last claim holding a channel on the node stops it, as
// does a start-up that finds none (StopIdleIMEX). A daemon that dies while
// claims hold channels is started again by the next Ensure (the next
// prepare, or the agent's health poll).

// IMEXDaemon is the node's IMEX daemon as the agent runs it
// (internal/imex/daemonpod).
type IMEXDaemon interface {
	// Ensure makes the daemon of domain run, without waiting for it to be
	// ready.
	Ensure(ctx context.Context, domain string) error
	// Stop stops it and returns once it is gone; none running is not an
	// error.
	Stop(ctx context.Context) error
}

// DefaultIMEXReadyWait is how long a prepare waits for a daemon it
// started to be ready before it fails, for the kubelet to retry.
const DefaultIMEXReadyWait = 20 * time.Second

// imexPollEvery is how often a prepare asks a starting daemon.
const imexPollEvery = 250 * time.Millisecond

// startIMEX makes the node's daemon run, where the agent runs it, and
// waits up to IMEX.ReadyWait for it to answer READY. m.imexMu is held,
// m.mu is not: the wait must not hold back the node's other claims.
func (m *Manager) startIMEX(ctx context.Context) error {
	x := m.cfg.IMEX
	if x == nil || x.Daemon == nil {
		return nil
	}
	domain := x.Domain()
	if domain == "" {
		return nil // channels() refuses the claim, naming the domain
	}
	if err := x.Daemon.Ensure(ctx, domain); err != nil {
		return withKind(ErrIMEXNotReady, fmt.Errorf("start the node's IMEX daemon: %w", err))
	}
	wait := x.ReadyWait
	if wait == 0 {
		wait = DefaultIMEXReadyWait
	}
	deadline := time.Now().Add(wait)
	for {
		ready, status, err := x.Status(ctx)
		if err == nil && ready {
			return nil
		}
		if time.Now().After(deadline) {
			return withKind(ErrIMEXNotReady, fmt.Errorf("the node's IMEX daemon, started for the claim, is not ready after %s (%s): the claim is prepared once it is", wait, statusText(status, err)))
		}
		select {
		case <-ctx.Done():
			return withKind(ErrIMEXNotReady, fmt.Errorf("waiting for the node's IMEX daemon: %w", ctx.Err()))
		case <-time.After(imexPollEvery):
		}
	}
}

// StopIdleIMEX stops the node's daemon, where the agent runs it, if no
// claim on the node holds an IMEX channel.
func (m *Manager) StopIdleIMEX(ctx context.Context) error {
	x := m.cfg.IMEX
	if x == nil || x.Daemon == nil {
		return nil
	}
	m.imexMu.Lock()
	defer m.imexMu.Unlock()
	if m.holdsChannels() {
		return nil
	}
	if err := x.Daemon.Stop(ctx); err != nil {
		return fmt.Errorf("stop the node's idle IMEX daemon: %w", err)
	}
	klog.FromContext(ctx).V(2).Info("No claim on the node holds an IMEX channel; its IMEX daemon is stopped")
	return nil
}

// holdsChannel reports whether c holds an IMEX channel.
func holdsChannel(c *checkpoint.Claim) bool {
	for _, d := range c.Devices {
		if _, ok := channelpool.DomainOf(d.Pool); ok {
			return true
		}
	}
	return false
}

// holdsChannels reports whether any claim recorded on the node, in any
// state, holds an IMEX channel.
func (m *Manager) holdsChannels() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.cp.Claims {
		if holdsChannel(c) {
			return true
		}
	}
	return false
}
