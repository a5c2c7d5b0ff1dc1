package explain

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/channelpool"
	"github.com/tessera-gpu/tessera/internal/inspect"
	"github.com/tessera-gpu/tessera/internal/names"
)

const rackDomain = "00000001-0000-0000-0000-000000000001.2"

// TestExplainRack: a job's channel claim fits only on the trays of the
// domain whose pool has a free channel, as the scheduler decides it: the
// trays' labels are derived from their GPUs' domain as their agents set
// them, the domain's channel devices count on each tray, an H100 node of
// no domain has none, and once another job holds the one channel the
// trays say who holds it. The pool is no node of its own.
func TestExplainRack(t *testing.T) {
	ctx := context.Background()
	var all []*resourceapi.ResourceSlice
	for _, n := range []struct{ profile, node string }{{"gb200-nvl72-tray", "tray-1"}, {"gb200-nvl72-tray", "tray-2"}, {"dgx-h100", "dgx-0"}} {
		s, _ := alloctest.PublishSim(t, n.profile, n.node)
		all = append(all, s...)
	}
	all = append(all, channelSlice(t, rackDomain, 1))
	classes, err := alloctest.Classes()
	if err != nil {
		t.Fatal(err)
	}
	group := func(name string) *resourceapi.ResourceClaim {
		return alloctest.Claim(name, alloctest.Request{Name: "channel", Class: "imex.gpu.tessera.dev", Count: 1})
	}
	snapshot := func(allocated ...resourceapi.ResourceClaim) *Input {
		s := &inspect.Snapshot{Source: "rack", Claims: allocated}
		for _, sl := range all {
			s.Slices = append(s.Slices, *sl.DeepCopy())
		}
		return &Input{Snapshot: s, Classes: classes}
	}
	verdicts := func(ex *Explanation) map[string]NodeVerdict {
		out := map[string]NodeVerdict{}
		for _, v := range ex.Nodes {
			out[v.Node] = v
		}
		return out
	}

	ex, err := Run(ctx, snapshot(), "", []*resourceapi.ResourceClaim{group("job-a")})
	if err != nil {
		t.Fatal(err)
	}
	vs := verdicts(ex)
	if len(vs) != 3 {
		t.Fatalf("nodes %v: want the two trays and the H100, no node for the pool", ex.Nodes)
	}
	if !vs["tray-1"].Fits || !vs["tray-2"].Fits || vs["dgx-0"].Fits {
		t.Errorf("fits: tray-1 %v, tray-2 %v, dgx-0 %v; want the trays only", vs["tray-1"].Fits, vs["tray-2"].Fits, vs["dgx-0"].Fits)
	}
	if r := strings.Join(vs["dgx-0"].Reasons, "; "); !strings.Contains(r, "in no multi-node NVLink domain") {
		t.Errorf("dgx-0's reasons %q do not say it is in no domain", r)
	}

	// Another job holds the one channel.
	copies := make([]*resourceapi.ResourceSlice, len(all))
	for i, sl := range all {
		copies[i] = sl.DeepCopy()
	}
	c := alloctest.NewCluster(copies, classes)
	other := group("job-b")
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tray-1", Labels: map[string]string{names.NodeLabelFabricDomain: rackDomain}}}
	if res, err := c.AllocateOn(ctx, node, other); err != nil || res == nil {
		t.Fatalf("job b: %v, %v", res, err)
	}
	ex, err = Run(ctx, snapshot(*other), "", []*resourceapi.ResourceClaim{group("job-a")})
	if err != nil {
		t.Fatal(err)
	}
	vs = verdicts(ex)
	for _, tray := range []string{"tray-1", "tray-2"} {
		if vs[tray].Fits || !strings.Contains(strings.Join(vs[tray].Reasons, "; "), "default/job-b") {
			t.Errorf("%s: fits %v, reasons %q; want refused, naming the job holding the channel", tray, vs[tray].Fits, vs[tray].Reasons)
		}
	}
	checkConsistent(t, ex)
}

// channelSlice is domain's pool of n channels, one slice, as its publisher
// writes it.
func channelSlice(t *testing.T, domain string, n int) *resourceapi.ResourceSlice {
	t.Helper()
	p, err := channelpool.Pool(domain, n)
	if err != nil {
		t.Fatal(err)
	}
	return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "channels-" + domain}, Spec: resourceapi.ResourceSliceSpec{
		Driver: names.DriverName, Pool: resourceapi.ResourcePool{Name: channelpool.PoolName(domain), ResourceSliceCount: 1},
		NodeSelector: p.NodeSelector, Devices: p.Slices[0].Devices,
	}}
}
