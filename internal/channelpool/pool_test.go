package channelpool

import (
	"context"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/names"
)

const domainA, domainB = "00000001-0000-0000-0000-000000000001.2", "00000001-0000-0000-0000-000000000001.3"

// slices are a pool as the resourceslice controller writes it.
func slices(t *testing.T, domain string, n int) []*resourceapi.ResourceSlice {
	t.Helper()
	p, err := Pool(domain, n)
	if err != nil {
		t.Fatal(err)
	}
	var out []*resourceapi.ResourceSlice
	for i, s := range p.Slices {
		out = append(out, &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", PoolName(domain), i)},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:       names.DriverName,
				Pool:         resourceapi.ResourcePool{Name: PoolName(domain), ResourceSliceCount: int64(len(p.Slices))},
				NodeSelector: p.NodeSelector,
				Devices:      s.Devices,
			},
		})
	}
	return out
}

func tray(name, domain string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if domain != "" {
		n.Labels = map[string]string{names.NodeLabelFabricDomain: domain}
	}
	return n
}

func group(name string) *resourceapi.ResourceClaim {
	return alloctest.Claim(name, alloctest.Request{Name: "channel", Class: "imex.gpu.tessera.dev", Count: 1})
}

// TestGroupsGetTheirOwnChannel: with the real allocator and the shipped
// DeviceClass, a group's claim gets one channel of the domain of the tray
// its first worker is scheduled to, with the domain's node selector, so
// every other worker is kept to that domain; a tray outside any domain, or
// of another domain whose pool is not there, gets none. Each group gets
// its own channel, and once the pool is spent the next group fits nowhere
// (it waits) until a group ends.
func TestGroupsGetTheirOwnChannel(t *testing.T) {
	ctx := context.Background()
	classes, err := alloctest.Classes()
	if err != nil {
		t.Fatal(err)
	}
	const n = 3
	c := alloctest.NewCluster(append(slices(t, domainA, n), slices(t, domainB, 1)...), classes)
	for _, node := range []*v1.Node{tray("plain", ""), tray("elsewhere", "00000002-0000-0000-0000-000000000001.1")} {
		if res, err := c.AllocateOn(ctx, node, group("g0")); err != nil || res != nil {
			t.Errorf("node %s outside the domains: %v, %v; want no channel", node.Name, res, err)
		}
	}
	seen := map[string]bool{}
	var first resourceapi.AllocationResult
	for i := range n {
		res, err := c.AllocateOn(ctx, tray(fmt.Sprintf("tray-%d", i), domainA), group(fmt.Sprintf("g%d", i)))
		if err != nil || len(res) != 1 {
			t.Fatalf("group %d: %v, %v", i, res, err)
		}
		r := res[0].Devices.Results[0]
		if r.Pool != PoolName(domainA) || seen[r.Device] {
			t.Fatalf("group %d got %s/%s: want a channel of %s no other group has", i, r.Pool, r.Device, PoolName(domainA))
		}
		seen[r.Device] = true
		if ch, ok := ChannelOf(r.Device); !ok || ch < 1 || ch > n {
			t.Errorf("group %d: device %s is no channel 1-%d", i, r.Device, n)
		}
		sel := res[0].NodeSelector
		if sel == nil || len(sel.NodeSelectorTerms) != 1 || sel.NodeSelectorTerms[0].MatchExpressions[0].Values[0] != domainA {
			t.Errorf("group %d: allocation's node selector %v, want domain %s's", i, sel, domainA)
		}
		if i == 0 {
			first = res[0]
		}
	}
	if res, err := c.AllocateOn(ctx, tray("tray-9", domainA), group("late")); err != nil || res != nil {
		t.Fatalf("a group beyond the domain's %d channels: %v, %v; want it to fit nowhere", n, res, err)
	}
	// The other domain's pool is its own.
	if res, err := c.AllocateOn(ctx, tray("tray-b", domainB), group("b")); err != nil || len(res) != 1 || res[0].Devices.Results[0].Pool != PoolName(domainB) {
		t.Errorf("a group in domain B: %v, %v", res, err)
	}
	c.Release(first)
	if res, err := c.AllocateOn(ctx, tray("tray-9", domainA), group("late")); err != nil || len(res) != 1 {
		t.Errorf("once a group ended: %v, %v; want its channel", res, err)
	}
}

// TestPool: channels 1..n in slices of at most 128, each device naming
// its channel and domain; channel 0 never; bad domains and counts refused.
func TestPool(t *testing.T) {
	p, err := Pool(domainA, MaxChannels)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Slices) != 16 || len(p.Slices[0].Devices) != 128 || len(p.Slices[15].Devices) != MaxChannels-15*128 {
		t.Errorf("%d slices", len(p.Slices))
	}
	d := p.Slices[0].Devices[0]
	if d.Name != "imex-channel-1" || *d.Attributes[AttrChannel].IntValue != 1 || *d.Attributes[attrDomain].StringValue != domainA || *d.Attributes[attrType].StringValue != TypeIMEXChannel {
		t.Errorf("first device %+v", d)
	}
	for _, tc := range []struct {
		domain string
		n      int
		err    string
	}{
		{domainA, 0, "want 1 to 2047"},
		{domainA, 2048, "want 1 to 2047"},
		{"", 1, "not a label value"},
		{"Upper.Case", 1, "pool name"},
		{strings.Repeat("a", 64), 1, "not a label value"},
	} {
		if _, err := Pool(tc.domain, tc.n); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("Pool(%q, %d): %v, want %q", tc.domain, tc.n, err, tc.err)
		}
	}
	for dev, want := range map[string]int{"imex-channel-7": 7, "imex-channel-0": 0, "imex-channel-07": 0, "imex-channel-2048": 0, "gpu-0": 0} {
		if ch, ok := ChannelOf(dev); ch != want || ok != (want != 0) {
			t.Errorf("ChannelOf(%s) = %d, %v", dev, ch, ok)
		}
	}
	if d, ok := DomainOf(PoolName(domainA)); !ok || d != domainA {
		t.Errorf("DomainOf = %q, %v", d, ok)
	}
	if _, ok := DomainOf("node-1"); ok {
		t.Error("a node's pool is a channel pool")
	}
}
