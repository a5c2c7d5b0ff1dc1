package driver

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/tessera-gpu/tessera/pkg/metrics"
	"github.com/tessera-gpu/tessera/pkg/metrics/metricstest"
	"github.com/tessera-gpu/tessera/pkg/slices"
)

// addShareClaim creates a claim allocated a share of device as the
// scheduler records it (a ShareID and what it consumed).
func (n *node) addShareClaim(name, device, memory string) *drapbv1.Claim {
	n.t.Helper()
	id := types.UID("share-" + name)
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)}}
	c.Status.Allocation = &resourceapi.AllocationResult{}
	c.Status.Allocation.Devices.Results = []resourceapi.DeviceRequestAllocationResult{{
		Request: "gpu", Driver: DriverName, Pool: "node-1", Device: device, ShareID: &id,
		ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse(memory), "computeUnits": resource.MustParse("0")},
	}}
	if _, err := n.client.ResourceV1().ResourceClaims("default").Create(n.ctx, c, metav1.CreateOptions{}); err != nil {
		n.t.Fatal(err)
	}
	return &drapbv1.Claim{Namespace: "default", Name: name, Uid: string(c.UID)}
}

// TestCapacitySharesOverGRPC prepares shares through the kubelet socket:
// each reply carries its ShareID (the kubelet keys devices by it), and the
// shared-device gauges follow the checkpoint.
func TestCapacitySharesOverGRPC(t *testing.T) {
	n := launch(t, &node{profile: "l4-4", sharing: slices.SharingCapacity, mps: true, metrics: metrics.New()})
	a, b := n.addShareClaim("a", "gpu-0", "7Gi"), n.addShareClaim("b", "gpu-0", "7Gi")
	whole := n.addShareClaim("whole", "gpu-1", "23034Mi")
	resp := n.prepare(a, b, whole)
	for _, c := range []*drapbv1.Claim{a, b, whole} {
		r := resp.Claims[c.Uid]
		if r.GetError() != "" {
			t.Fatalf("prepare %s: %s", c.Name, r.GetError())
		}
		if got := r.Devices[0].GetShareId(); got != "share-"+c.Name {
			t.Errorf("claim %s: reply ShareID %q", c.Name, got)
		}
	}
	s := metricstest.Scrape(t, n.metrics.Handler())
	expect(t, "gpu-0 memory", s.Value("tessera_shared_device_memory_bytes", "device", "gpu-0"), 23034<<20)
	expect(t, "gpu-0 allocated", s.Value("tessera_shared_device_memory_allocated_bytes", "device", "gpu-0"), 14<<30)
	expect(t, "gpu-0 shares", s.Value("tessera_shared_device_shares", "device", "gpu-0"), 2)
	expect(t, "gpu-1 allocated (whole)", s.Value("tessera_shared_device_memory_allocated_bytes", "device", "gpu-1"), 23034<<20)
	expect(t, "gpu-1 compute allocated (whole)", s.Value("tessera_shared_device_compute_units_allocated", "device", "gpu-1"), 58)
	expect(t, "gpu-2 allocated", s.Value("tessera_shared_device_memory_allocated_bytes", "device", "gpu-2"), 0)
	expect(t, "MPS daemons", s.Value("tessera_mps_daemons"), 1)

	if e := n.unprepare(a).Claims[a.Uid].GetError(); e != "" {
		t.Fatal(e)
	}
	s = metricstest.Scrape(t, n.metrics.Handler())
	expect(t, "gpu-0 allocated after one share went", s.Value("tessera_shared_device_memory_allocated_bytes", "device", "gpu-0"), 7<<30)
}
