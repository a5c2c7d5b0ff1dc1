package doctor

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/channelpool"
	"github.com/tessera-gpu/tessera/internal/names"
)

// TestCheckIMEX: a tray whose domain's channels are published passes with
// how many are allocated; one whose domain's are not, while another
// domain's are, warns; a recent prepare that waited for the tray's IMEX
// daemon fails, quoting it; a node of no domain gets no finding.
func TestCheckIMEX(t *testing.T) {
	const domA, domB = "00000001-0000-0000-0000-000000000001.2", "00000001-0000-0000-0000-000000000001.3"
	pool := func(d string, n int) resourceapi.ResourceSlice {
		p, err := channelpool.Pool(d, n)
		if err != nil {
			t.Fatal(err)
		}
		return resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: names.DriverName, Pool: resourceapi.ResourcePool{Name: channelpool.PoolName(d)}, NodeSelector: p.NodeSelector, Devices: p.Slices[0].Devices}}
	}
	claim := resourceapi.ResourceClaim{Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
		Results: []resourceapi.DeviceRequestAllocationResult{{Driver: names.DriverName, Pool: channelpool.PoolName(domA), Device: channelpool.DeviceName(1)}},
	}}}}
	tray := func(d string) *target {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "tray-1", Labels: map[string]string{}}}
		if d != "" {
			n.Labels[names.NodeLabelFabricDomain] = d
		}
		return &target{name: "tray-1", node: n}
	}
	in := &Input{Slices: []resourceapi.ResourceSlice{pool(domA, 8)}, Claims: []resourceapi.ResourceClaim{claim}}
	for _, tc := range []struct {
		name   string
		in     *Input
		t      *target
		status Status
		says   string
	}{
		{"published", in, tray(domA), StatusPass, "8 IMEX channels published, 1 allocated"},
		{"not this domain's", in, tray(domB), StatusWarn, "whose IMEX channels no agent publishes"},
		{"none offered", &Input{}, tray(domA), StatusPass, "offers no IMEX channels"},
		{"the daemon waited for", in, func() *target {
			tr := tray(domA)
			tr.events = []corev1.Event{prepEvent("team", "job-0", "tray-1", time.Now(), 3, "prepare claim team/job-imex: the node's IMEX daemon is not ready (NOT_READY: injected fault): the claim is prepared once it is")}
			return tr
		}(), StatusFail, "pod team/job-0"},
	} {
		fs := checkIMEX(tc.in, tc.t)
		if len(fs) != 1 || fs[0].Status != tc.status || !strings.Contains(fs[0].Detail, tc.says) || fs[0].Check != CheckIMEX {
			t.Errorf("%s: %+v, want %s saying %q", tc.name, fs, tc.status, tc.says)
		}
	}
	if fs := checkIMEX(in, tray("")); len(fs) != 0 {
		t.Errorf("a node of no domain: %+v", fs)
	}
}
