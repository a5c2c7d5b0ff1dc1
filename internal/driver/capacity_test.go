package driver

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/tessera-gpu/tessera/internal/metrics"
	"github.com/tessera-gpu/tessera/internal/metrics/metricstest"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// addShareClaim creates a claim allocated a share of device as the
// scheduler records it (a ShareID and what it consumed).
func (n *node) addShareClaim(name, device, memory string) *drapbv1.Claim {
	n.t.Helper()
	id := types.UID("share-" + name)
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)}}
	c.Status.Allocation = &resourceapi.AllocationResult{}
	c.Status.Allocation.Devices.Results = []resourceapi.DeviceRequestAllocationResult{{
		Request: "gpu", Driver: names.DriverName, Pool: "node-1", Device: device, ShareID: &id,
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
	n := launch(t, &node{profile: "l4-4", sharing: publish.SharingCapacity, mps: true, metrics: metrics.New()})
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
	// The two shares of gpu-0 are held by MPS client limits only.
	expect(t, "shares held by process limits", s.Value("tessera_prepared_shares", "memory_isolation", "process"), 2)
	expect(t, "shares held by the kernel", s.Value("tessera_prepared_shares", "memory_isolation", "kernel"), 0)

	// Each share says on its claim how it is held: by its processes' MPS
	// client limits, which is no isolation boundary, and why the kernel
	// does not hold it. The whole-GPU claim has nothing to say.
	for _, c := range []*drapbv1.Claim{a, b} {
		st, r, msg := shareStatus(t, n, c.Name)
		if st != metav1.ConditionFalse || r != ReasonProcessLimitsOnly || !strings.Contains(msg, "at most 7168MiB of device memory") ||
			!strings.Contains(msg, "not an isolation boundary") || !strings.Contains(msg, "the agent runs without a memory limit hook") {
			t.Errorf("claim %s: ShareEnforced %s %s %q", c.Name, st, r, msg)
		}
	}
	if st, _, _ := shareStatus(t, n, "whole"); st != "" {
		t.Errorf("whole-GPU claim has a ShareEnforced condition %s", st)
	}
	// A repeated prepare (kubelet restart) writes nothing more.
	before := len(n.client.Actions())
	n.prepare(a)
	for _, act := range n.client.Actions()[before:] {
		if act.GetVerb() == "patch" {
			t.Errorf("repeated prepare wrote the claim again: %v", act)
		}
	}

	if e := n.unprepare(a).Claims[a.Uid].GetError(); e != "" {
		t.Fatal(e)
	}
	s = metricstest.Scrape(t, n.metrics.Handler())
	expect(t, "gpu-0 allocated after one share went", s.Value("tessera_shared_device_memory_allocated_bytes", "device", "gpu-0"), 7<<30)
}

// shareStatus is the ShareEnforced condition on claim's one device ("" when none).
func shareStatus(t *testing.T, n *node, claim string) (metav1.ConditionStatus, string, string) {
	t.Helper()
	c, err := n.client.ResourceV1().ResourceClaims("default").Get(n.ctx, claim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ds := range c.Status.Devices {
		if ds.ShareID == nil || *ds.ShareID != "share-"+claim {
			t.Errorf("claim %s: device status %s without its ShareID", claim, ds.Device)
		}
		for _, k := range ds.Conditions {
			if k.Type == ConditionShareEnforced {
				return k.Status, k.Reason, k.Message
			}
		}
	}
	return "", "", ""
}

// TestCapacityShareOnAMDSaysSchedulingOnly: nothing enforces an AMD share,
// and its claim says so.
func TestCapacityShareOnAMDSaysSchedulingOnly(t *testing.T) {
	n := launch(t, &node{profile: "mixed-inference", sharing: publish.SharingCapacity})
	c := n.addShareClaim("amd", "gpu-4", "20Gi")
	if e := n.prepare(c).Claims[c.Uid].GetError(); e != "" {
		t.Fatal(e)
	}
	st, r, msg := shareStatus(t, n, "amd")
	if st != metav1.ConditionFalse || r != ReasonSchedulingOnly || !strings.Contains(msg, "accounting only") {
		t.Errorf("ShareEnforced %s %s %q", st, r, msg)
	}
}
