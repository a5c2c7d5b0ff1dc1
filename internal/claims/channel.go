package claims

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/cdi"
	"github.com/tessera-gpu/tessera/internal/channelpool"
	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/imex"
)

// A claim of an IMEX channel (internal/channelpool: a device of a
// multi-node NVLink domain's pool, which a pod group's workers share) is
// prepared on each node a worker lands on. Nothing on the node changes:
// the channel's device node goes into the claim's CDI spec, which the
// runtime creates in the container, and the node's IMEX daemon must be
// ready first, since a channel is of no use without it: until then the
// prepare fails with ErrIMEXNotReady and the kubelet tries again. Such a
// claim is a plain one (no effects): a crash before its entry is saved
// leaves at most a spec, which the start-up sweep removes.

// ErrIMEXNotReady: the node's IMEX daemon is not ready (or cannot be
// asked) for a claim of an IMEX channel; the kubelet retries the prepare.
var ErrIMEXNotReady = errors.New("IMEX not ready")

// IMEX is what the node offers for IMEX channels.
type IMEX struct {
	// Domain is the multi-node NVLink domain of the node's GPUs ("" for
	// none): the only one whose channels it prepares.
	Domain func() string
	// Channels is the major number of the node's IMEX channel devices and
	// how many channels the driver has.
	Channels func() (major uint32, count int, err error)
	// Status asks the node's IMEX daemon whether it is ready, and why not.
	Status func(ctx context.Context) (ready bool, status string, err error)
	// Daemon, where the agent runs the node's daemon itself, starts and
	// stops it (imexdaemon.go); nil where the host runs it.
	Daemon IMEXDaemon
	// ReadyWait is how long a prepare waits for a daemon it started
	// (DefaultIMEXReadyWait when 0).
	ReadyWait time.Duration
}

// channelResults splits the claim's results for this driver into IMEX
// channels and the rest.
func (m *Manager) channelResults(claim *resourceapi.ResourceClaim) (channels, others []resourceapi.DeviceRequestAllocationResult) {
	if claim.Status.Allocation == nil {
		return nil, nil
	}
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != m.cfg.DriverName {
			continue
		}
		if _, ok := channelpool.DomainOf(r.Pool); ok {
			channels = append(channels, r)
		} else {
			others = append(others, r)
		}
	}
	return channels, others
}

// prepareChannels prepares a claim of IMEX channels.
func (m *Manager) prepareChannels(ctx context.Context, ref cdi.ClaimRef, results, others []resourceapi.DeviceRequestAllocationResult) ([]Device, error) {
	if len(others) > 0 {
		return nil, fmt.Errorf("prepare claim %s: %w", ref, withKind(ErrConfigRejected, fmt.Errorf(
			"it holds an IMEX channel (%s/%s) beside other devices (%s/%s): a channel's claim is shared by a pod group's workers on several nodes, so it must hold the channel alone; give the GPUs a claim of each worker's own",
			results[0].Pool, results[0].Device, others[0].Pool, others[0].Device)))
	}
	m.imexMu.Lock()
	defer m.imexMu.Unlock()
	if err := m.startIMEX(ctx); err != nil {
		return nil, fmt.Errorf("prepare claim %s: %w", ref, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.cp.Claims[ref.UID]; ok && c.State == checkpoint.PrepareCompleted && specExists(m.cfg.CDI.SpecPath(ref.UID)) {
		if c.Unconfirmed {
			prev := m.keep(c.UID)
			c.Unconfirmed = false
			if err := m.save(prev); err != nil {
				return nil, fmt.Errorf("prepare claim %s: %w", ref, err)
			}
		}
		return devicesOf(c), nil
	}
	chs, err := m.channels(ctx, ref, results)
	if err != nil {
		return nil, fmt.Errorf("prepare claim %s: %w", ref, err)
	}
	ids, err := m.cfg.CDI.WriteClaim(cdi.ClaimSpec{Claim: ref, Channels: chs})
	if err != nil {
		return nil, fmt.Errorf("prepare claim %s: %w", ref, withKind(ErrCDI, fmt.Errorf("write CDI spec: %w", err)))
	}
	entry := &checkpoint.Claim{UID: ref.UID, Namespace: ref.Namespace, Name: ref.Name, State: checkpoint.PrepareCompleted, Updated: time.Now()}
	for i, c := range chs {
		d := c.Checkpoint()
		d.CDIDeviceIDs = ids[i]
		entry.Devices = append(entry.Devices, d)
	}
	prev := m.keep(ref.UID)
	m.cp.Claims[ref.UID] = entry
	if err := m.save(prev); err != nil {
		// The spec is not the record's: it goes (a failure leaves it to
		// the start-up sweep).
		_ = m.cfg.CDI.RemoveClaimSpec(ref.UID)
		return nil, fmt.Errorf("prepare claim %s: %w", ref, err)
	}
	klog.FromContext(ctx).V(2).Info("Prepared claim", "claim", klog.KRef(ref.Namespace, ref.Name), "uid", ref.UID, "imexChannels", len(chs))
	return devicesOf(entry), nil
}

// channels checks the claim's channels against the node (its domain, its
// channel count, the other claims, its IMEX daemon) and returns what its
// spec is written from. m.mu is held.
func (m *Manager) channels(ctx context.Context, ref cdi.ClaimRef, results []resourceapi.DeviceRequestAllocationResult) ([]cdi.Channel, error) {
	x := m.cfg.IMEX
	if x == nil {
		return nil, withKind(ErrDeviceNotOnNode, fmt.Errorf("allocated IMEX channel %s/%s, but this node's agent offers no IMEX channels (--imex-channels)", results[0].Pool, results[0].Device))
	}
	domain := x.Domain()
	var nums []int
	for _, r := range results {
		d, _ := channelpool.DomainOf(r.Pool)
		ch, ok := channelpool.ChannelOf(r.Device)
		if d != domain || !ok {
			return nil, withKind(ErrDeviceNotOnNode, fmt.Errorf("allocated IMEX channel %s/%s is not one of this node's multi-node NVLink domain (%q)", r.Pool, r.Device, domain))
		}
		if other := m.channelHolder(ref.UID, r.Pool, r.Device); other != "" {
			return nil, withKind(ErrDeviceInUse, fmt.Errorf("IMEX channel %s/%s is still prepared for another claim on this node; it is freed when that claim's pods are gone", r.Pool, r.Device))
		}
		nums = append(nums, ch)
	}
	major, count, err := x.Channels()
	if err != nil {
		return nil, withKind(ErrIMEXNotReady, fmt.Errorf("the node's IMEX channels: %w", err))
	}
	ready, status, err := x.Status(ctx)
	if err != nil || !ready {
		return nil, withKind(ErrIMEXNotReady, fmt.Errorf("the node's IMEX daemon is not ready (%s): the claim is prepared once it is", statusText(status, err)))
	}
	out := make([]cdi.Channel, len(results))
	for i, r := range results {
		if nums[i] >= count {
			return nil, withKind(ErrDeviceNotOnNode, fmt.Errorf("IMEX channel %d (%s/%s) is beyond the %d channels of this node's driver (NVreg_ImexChannelCount)", nums[i], r.Pool, r.Device, count))
		}
		out[i] = cdi.Channel{Request: r.Request, Pool: r.Pool, Device: r.Device, Node: imex.ChannelNode(major, nums[i])}
	}
	return out, nil
}

// channelHolder is the UID of another prepared claim holding pool/device.
// m.mu is held.
func (m *Manager) channelHolder(uid, pool, device string) string {
	for _, c := range m.cp.Claims {
		if c.UID == uid {
			continue
		}
		for _, d := range c.Devices {
			if d.Pool == pool && d.Device == device {
				return c.UID
			}
		}
	}
	return ""
}

func statusText(status string, err error) string {
	switch {
	case err != nil:
		return err.Error()
	case strings.TrimSpace(status) == "":
		return "no status"
	}
	return strings.TrimSpace(status)
}

// PreparedChannel is an IMEX channel a prepared claim holds on this node.
type PreparedChannel struct{ Pool, Device string }

// PreparedChannels are the IMEX channels of the claims prepared on this
// node, in claim order: the devices whose health the node's IMEX daemon
// decides.
func (m *Manager) PreparedChannels() []PreparedChannel {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []PreparedChannel
	for _, c := range sortedClaims(m.cp) {
		if c.State != checkpoint.PrepareCompleted {
			continue
		}
		for _, d := range c.Devices {
			if _, ok := channelpool.DomainOf(d.Pool); ok {
				out = append(out, PreparedChannel{Pool: d.Pool, Device: d.Device})
			}
		}
	}
	return out
}
