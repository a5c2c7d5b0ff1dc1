package explain

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedulingapi "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

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

// rackGang is a PodGroup of workers pods in namespace ns, each with its
// own claim of a whole GB200 tray (4 GPUs) and the group's claim of an
// IMEX channel.
func rackGang(in *Input, name string, workers int) {
	gpus := resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name + "-gpus", Namespace: "ns"}}
	gpus.Spec.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "gpus", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: "nvidia.gpu.tessera.dev", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 4,
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["gpu.tessera.dev"].model == "GB200"`}}}}}}
	channel := resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name + "-imex", Namespace: "ns"}}
	channel.Spec.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "channel", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: "imex.gpu.tessera.dev", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}
	pg := schedulingapi.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec: schedulingapi.PodGroupSpec{
			SchedulingPolicy: schedulingapi.PodGroupSchedulingPolicy{Gang: &schedulingapi.GangSchedulingPolicy{MinCount: int32(workers)}},
			ResourceClaims:   []schedulingapi.PodGroupResourceClaim{{Name: "imex", ResourceClaimTemplateName: ptr.To(channel.Name)}},
		}}
	in.Templates = append(in.Templates, gpus, channel)
	in.PodGroups = append(in.PodGroups, pg)
	for i := range workers {
		in.Pods = append(in.Pods, corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-worker-%d", name, i), Namespace: "ns"},
			Spec: corev1.PodSpec{
				SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To(name)},
				ResourceClaims: []corev1.PodResourceClaim{
					{Name: "gpus", ResourceClaimTemplateName: ptr.To(gpus.Name)},
					{Name: "imex", ResourceClaimTemplateName: ptr.To(channel.Name)},
				},
			},
		})
	}
}

// TestRunGangRack: a job's channel, shared by its group, keeps every
// member to the channel's domain, not to the node of the first member: two
// workers of a whole tray each fit on the domain's two trays; a third is
// stuck, and the explanation says the domain's GPUs are all held, though
// the H100 node's are free.
func TestRunGangRack(t *testing.T) {
	ctx := context.Background()
	f := newExplainFleet(t)
	for _, tc := range []struct {
		workers int
		fits    bool
	}{{2, true}, {3, false}} {
		in := f.input()
		rackGang(in, "train", tc.workers)
		gx, err := RunGang(ctx, in, "ns", "train")
		if err != nil {
			t.Fatal(err)
		}
		if gx.Fits != tc.fits {
			t.Fatalf("%d workers: fits %v, want %v: %+v", tc.workers, gx.Fits, tc.fits, gx)
		}
		for _, m := range gx.Placed {
			if !strings.HasPrefix(m.Node, "tray-") {
				t.Errorf("%d workers: %s placed on %s, no tray of the domain", tc.workers, m.Pod, m.Node)
			}
		}
		if tc.fits {
			if len(gx.Placed) != 2 || gx.Placed[0].Node == gx.Placed[1].Node {
				t.Errorf("2 workers placed %+v, want one per tray", gx.Placed)
			}
			continue
		}
		notes := strings.Join(gx.Stuck.Notes, "; ")
		for _, want := range []string{"ties it to the nodes of multi-node NVLink domain " + rackDomain, "has 0 of its 8 whole GPUs free on its 2 nodes"} {
			if !strings.Contains(notes, want) {
				t.Errorf("the stuck member's notes %q do not say %q", notes, want)
			}
		}
		if len(gx.Stuck.Nodes) != 2 {
			t.Errorf("the stuck member is explained on %d nodes, want the domain's 2", len(gx.Stuck.Nodes))
		}
	}
}
