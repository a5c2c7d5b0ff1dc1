package driver

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
)

// The node's IMEX daemon decides the health of the IMEX channels its
// prepared claims hold: a daemon that is not ready (stopped, crashed, cut
// from its peers) leaves the channel useless to the job's workers here, so
// each such channel is reported Unhealthy to the kubelet (KEP-4680: the
// pod's status shows it), with the daemon's status as the message, and the
// tessera_imex_daemon_ready gauge says so for the alert. NVIDIA's
// ComputeDomains leave such failures out of any status (its issue #1417).

// imexPoll is how often the daemon is asked.
const imexPoll = 10 * time.Second

// imexHealth is the last answer of the node's IMEX daemon.
type imexHealth struct {
	mu      sync.Mutex
	known   bool // asked at least once
	ready   bool
	status  string
	checked time.Time
}

// set records an answer and reports whether it changed the health.
func (h *imexHealth) set(ready bool, status string, at time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	changed := !h.known || h.ready != ready || (!ready && h.status != status)
	h.known, h.ready, h.status, h.checked = true, ready, status, at
	return changed
}

// forget drops the last answer: the next one is news.
func (h *imexHealth) forget() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.known, h.ready, h.status = false, false, ""
}

// watchIMEX asks the node's IMEX daemon every so often, while the node is
// in a domain, and wakes the kubelet's health streams when its answer
// changes.
func (d *Driver) watchIMEX(ctx context.Context, every time.Duration) {
	if d.opts.IMEXHost == nil {
		return
	}
	if d.opts.IMEXDaemon != nil && d.claims != nil {
		// A daemon the last agent left running with no claim for it (it
		// crashed between the last unprepare and the stop) goes.
		if err := d.claims.StopIdleIMEX(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "Stopping the node's idle IMEX daemon at start-up")
		}
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) { d.checkIMEX(ctx) }, every)
}

// checkIMEX asks the daemon once. Where the agent runs the daemon, it runs
// only while a claim holds a channel: idle, there is nothing to ask (and no
// gauge, which would read as a failure); busy, a daemon that died is
// started again first, and reported not ready until it is.
func (d *Driver) checkIMEX(ctx context.Context) {
	domain := d.pub.fabricDomain()
	if domain == "" {
		return
	}
	if d.opts.IMEXDaemon != nil {
		if d.claims == nil || len(d.claims.PreparedChannels()) == 0 {
			d.opts.Metrics.ClearIMEXReady()
			d.imexState.forget()
			return
		}
		if err := d.opts.IMEXDaemon.Ensure(ctx, domain); err != nil {
			klog.FromContext(ctx).Error(err, "Restarting the node's IMEX daemon for the claims holding channels")
		}
	}
	ready, status, err := d.opts.IMEXHost.Status(ctx)
	if err != nil {
		status = err.Error()
	}
	d.opts.Metrics.SetIMEXReady(domain, ready)
	if !d.imexState.set(ready, status, time.Now()) {
		return
	}
	logger := klog.FromContext(ctx)
	if ready {
		logger.Info("The node's IMEX daemon is ready", "fabricDomain", domain)
	} else {
		logger.Info("Warning: the node's IMEX daemon is not ready; its prepared channels are reported unhealthy", "fabricDomain", domain, "status", status)
	}
	d.health.changedNow(ctx)
}

// channelHealth is the health of the prepared IMEX channels, by the
// daemon's last answer (Unknown before the first).
func (d *Driver) channelHealth(now time.Time) []kubeletplugin.DeviceHealth {
	if d.opts.IMEXHost == nil || d.claims == nil {
		return nil
	}
	chs := d.claims.PreparedChannels()
	if len(chs) == 0 {
		return nil
	}
	d.imexState.mu.Lock()
	st, msg := kubeletplugin.HealthStatusUnknown, "the node's IMEX daemon not asked yet"
	if d.imexState.known {
		st, msg = kubeletplugin.HealthStatusHealthy, ""
		if !d.imexState.ready {
			st, msg = kubeletplugin.HealthStatusUnhealthy, "the node's IMEX daemon is not ready: "+d.imexState.status
		}
	}
	d.imexState.mu.Unlock()
	out := make([]kubeletplugin.DeviceHealth, len(chs))
	for i, c := range chs {
		out[i] = kubeletplugin.DeviceHealth{PoolName: c.Pool, DeviceName: c.Device, Health: st, LastUpdated: now, Message: msg}
	}
	return out
}
