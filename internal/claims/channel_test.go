package claims

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/channelpool"
)

const trayDomain = "00000001-0000-0000-0000-000000000001.2"

// imexNode is what a GB200 tray offers: its domain, 2048 channels of major
// 234, and a daemon whose readiness the test sets.
type imexNode struct {
	ready  bool
	status string
}

func (n *imexNode) config() *IMEX {
	return &IMEX{
		Domain:   func() string { return trayDomain },
		Channels: func() (uint32, int, error) { return 234, 2048, nil },
		Status:   func(context.Context) (bool, string, error) { return n.ready, n.status, nil },
	}
}

// channelClaim is a claim allocated channel ch of domain's pool.
func channelClaim(name, domain string, ch int) *resourceapi.ResourceClaim {
	c := allocated(name)
	c.Status.Allocation.Devices.Results = []resourceapi.DeviceRequestAllocationResult{{
		Request: "channel", Driver: driverName, Pool: channelpool.PoolName(domain), Device: channelpool.DeviceName(ch),
	}}
	return c
}

// channelNodes are the device nodes injected for ids.
func (e *env) channelNodes(ids []string) []string {
	e.t.Helper()
	var out []string
	for _, d := range e.injected(ids).Linux.Devices {
		out = append(out, fmt.Sprintf("%s %s %d:%d", d.Path, d.Type, d.Major, d.Minor))
	}
	return out
}

// TestChannelClaim: a claim of an IMEX channel of the node's domain waits
// (ErrIMEXNotReady, nothing written) until the node's IMEX daemon is
// ready, then gets a spec whose one device is the channel's node, resolved
// by the real CDI library; it is idempotent, survives a reboot (the spec
// written again at the kubelet's prepare) and goes whole at unprepare.
// A channel another claim holds, of another domain, beyond the driver's
// count, beside GPUs, or on an agent without IMEX is refused, naming why.
func TestChannelClaim(t *testing.T) {
	ctx := ctxFor(t)
	n := &imexNode{status: "NOT_READY: waiting for 10.0.0.3 (1 of 4 peers connected)"}
	e := newEnv(t, "gb200-nvl72-tray")
	e.imex = n.config()
	m, _ := e.start(nil)
	claim := channelClaim("group", trayDomain, 5)

	_, err := m.Prepare(ctx, claim)
	if !errors.Is(err, ErrIMEXNotReady) || !strings.Contains(err.Error(), "1 of 4 peers") {
		t.Fatalf("prepare before the daemon is ready: %v, want ErrIMEXNotReady with its status", err)
	}
	if e.hasSpec("uid-group") || len(m.Prepared()) != 0 {
		t.Fatal("a channel claim not ready left a spec or an entry")
	}
	n.ready = true
	devs, err := m.Prepare(ctx, claim)
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 1 || devs[0].Pool != channelpool.PoolName(trayDomain) || devs[0].Name != "imex-channel-5" || len(devs[0].CDIDeviceIDs) != 1 {
		t.Fatalf("devices %+v", devs)
	}
	if got := e.channelNodes(devs[0].CDIDeviceIDs); len(got) != 1 || got[0] != "/dev/nvidia-caps-imex-channels/channel5 c 234:5" {
		t.Errorf("container nodes %v, want channel 5 alone", got)
	}
	again, err := m.Prepare(ctx, claim)
	if err != nil || fmt.Sprint(again) != fmt.Sprint(devs) {
		t.Errorf("prepare again: %+v, %v; want %+v", again, err, devs)
	}

	for _, tc := range []struct {
		name  string
		claim *resourceapi.ResourceClaim
		kind  error
		says  string
	}{
		{"the same channel for another claim", channelClaim("other", trayDomain, 5), ErrDeviceInUse, "still prepared for another claim"},
		{"another domain's channel", channelClaim("far", "00000001-0000-0000-0000-000000000001.3", 6), ErrDeviceNotOnNode, "not one of this node's multi-node NVLink domain"},
		{"beside a GPU", func() *resourceapi.ResourceClaim {
			c := channelClaim("mixed", trayDomain, 7)
			c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, allocated("x", "gpu-0").Status.Allocation.Devices.Results...)
			return c
		}(), ErrConfigRejected, "must hold the channel alone"},
	} {
		if _, err := m.Prepare(ctx, tc.claim); !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, tc.kind, tc.says)
		}
	}
	small := newEnv(t, "gb200-nvl72-tray")
	small.imex = n.config()
	small.imex.Channels = func() (uint32, int, error) { return 234, 4, nil }
	sm, _ := small.start(nil)
	if _, err := sm.Prepare(ctx, channelClaim("big", trayDomain, 5)); err == nil || !strings.Contains(err.Error(), "beyond the 4 channels") {
		t.Errorf("a channel beyond the driver's count: %v", err)
	}
	none := newEnv(t, "gb200-nvl72-tray")
	nm, _ := none.start(nil)
	if _, err := nm.Prepare(ctx, claim); !errors.Is(err, ErrDeviceNotOnNode) || !strings.Contains(err.Error(), "--imex-channels") {
		t.Errorf("an agent without IMEX: %v", err)
	}

	// A reboot: the spec (tmpfs) is gone, the entry unconfirmed; the
	// kubelet's prepare writes it again.
	e.bootID = "boot-2"
	if err := removeSpecs(e); err != nil {
		t.Fatal(err)
	}
	m, _ = e.start(nil)
	if devs, err = m.Prepare(ctx, claim); err != nil || !e.hasSpec("uid-group") || m.Prepared()["uid-group"].Unconfirmed {
		t.Fatalf("prepare after a reboot: %+v, %v", devs, err)
	}
	if err := m.Unprepare(ctx, "uid-group", "default", "group"); err != nil {
		t.Fatal(err)
	}
	if e.hasSpec("uid-group") || len(m.Prepared()) != 0 {
		t.Error("unprepare left the channel claim's spec or entry")
	}
}

// removeSpecs removes every claim spec, as a reboot empties /var/run/cdi.
func removeSpecs(e *env) error {
	for _, f := range e.specFiles() {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	return nil
}
