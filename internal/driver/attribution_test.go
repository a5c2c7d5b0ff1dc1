package driver

import (
	"strconv"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/internal/poll"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/metrics"
	"github.com/tessera-gpu/tessera/internal/metrics/metricstest"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/podresources"
	"github.com/tessera-gpu/tessera/internal/podresources/podresourcestest"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// pollPods polls a PodResources server answering uses once, as the agent
// polls the kubelet.
func (n *node) pollPods(srv *podresourcestest.Server, uses ...podresourcestest.Use) *podresources.Poller {
	n.t.Helper()
	srv.Set(podresourcestest.Response(uses...))
	p := podresources.NewPoller(srv.Socket, names.DriverName, time.Hour, nil)
	p.Poll(n.ctx)
	return p
}

// attribution polls a PodResources server answering uses and exports
// what the agent joins from it, as the agent wires them.
func (n *node) attribution(srv *podresourcestest.Server, uses ...podresourcestest.Use) metricstest.Snapshot {
	n.t.Helper()
	p := n.pollPods(srv, uses...)
	n.metrics.SetAllocationSource(func() []metrics.DeviceAllocation { return n.driver.Attribution(p.Current()) })
	return metricstest.Scrape(n.t, n.metrics.Handler())
}

func use(pod, claim, device string) podresourcestest.Use {
	return podresourcestest.Use{Namespace: "team-a", Pod: pod, Container: "main", ClaimNamespace: "default", Claim: claim,
		Driver: names.DriverName, Pool: "node-1", Device: device}
}

// TestAttributionStatic: a whole GPU and a static MIG instance, each held
// by a pod's container, carry the UUIDs dcgm-exporter labels them with
// (the GPU's; a MIG instance's parent GPU and GPU instance id); other
// drivers' devices are not exported.
func TestAttributionStatic(t *testing.T) {
	n := launch(t, &node{profile: "dgx-h100-mig", metrics: metrics.New()})
	pub := n.driver.Published()
	var whole, mig string
	for _, name := range pub.Order {
		e := pub.Devices[name]
		switch {
		case whole == "" && e.Partition == nil && e.Carve == nil:
			whole = name
		case mig == "" && e.Partition != nil && e.Partition.Kind == inventory.PartitionMIG:
			mig = name
		}
	}
	if whole == "" || mig == "" {
		t.Fatalf("dgx-h100-mig publishes no whole GPU (%q) or no MIG instance (%q)", whole, mig)
	}
	resp := n.prepare(n.addClaim("train", whole), n.addClaim("infer", mig))
	for uid, r := range resp.Claims {
		if r.GetError() != "" {
			t.Fatalf("prepare %s: %s", uid, r.GetError())
		}
	}
	srv := podresourcestest.Start(t)
	other := use("other", "theirs", whole)
	other.Driver = "gpu.nvidia.com"
	s := n.attribution(srv, use("train-0", "train", whole), use("infer-0", "infer", mig), other)

	g, p := pub.Devices[mig].GPU, pub.Devices[mig].Partition
	for _, want := range [][]string{
		{"node", "node-1", "device", whole, "uuid", pub.Devices[whole].GPU.UUID, "parent_uuid", "", "gpu_instance", "", "profile", "",
			"claim_namespace", "default", "claim", "train", "namespace", "team-a", "pod", "train-0", "container", "main", "share_id", ""},
		{"node", "node-1", "device", mig, "uuid", p.UUID, "parent_uuid", g.UUID, "gpu_instance", strconv.Itoa(p.GPUInstanceID), "profile", p.Profile,
			"claim_namespace", "default", "claim", "infer", "namespace", "team-a", "pod", "infer-0", "container", "main", "share_id", ""},
	} {
		if !s.Has("tessera_device_allocation_info", want...) {
			t.Errorf("no tessera_device_allocation_info%v in\n%v", want, s["tessera_device_allocation_info"])
		}
	}
	if got := len(s["tessera_device_allocation_info"].GetMetric()); got != 2 {
		t.Errorf("%d series, want 2 (another driver's device is not Tessera's)", got)
	}
	if p.UUID == "" || g.UUID == "" || p.Profile == "" {
		t.Fatalf("simulated MIG instance without UUIDs or profile: %+v", p)
	}
}

// TestAttributionDynamic: a partition carved at prepare has its UUID only
// in the checkpoint; the series carries it under its GPU's.
func TestAttributionDynamic(t *testing.T) {
	n := launch(t, &node{profile: "dgx-h100", partitioning: publish.Dynamic, metrics: metrics.New()})
	pub := n.driver.Published()
	var placement string
	for _, name := range pub.Order {
		if e := pub.Devices[name]; e.Carve != nil && e.Partition == nil {
			placement = name
			break
		}
	}
	if placement == "" {
		t.Fatal("no dynamic placement published")
	}
	if r := n.prepare(n.addClaim("carved", placement)); r.Claims["uid-carved"].GetError() != "" {
		t.Fatal(r.Claims["uid-carved"].GetError())
	}
	rec := n.checkpointClaims()["uid-carved"].Devices[0]
	if rec.PartitionUUID == "" {
		t.Fatalf("checkpoint has no partition UUID: %+v", rec)
	}
	s := n.attribution(podresourcestest.Start(t), use("carved-0", "carved", placement))
	want := []string{"device", placement, "uuid", rec.PartitionUUID, "parent_uuid", rec.GPUUUID, "profile", pub.Devices[placement].Carve.Profile, "pod", "carved-0"}
	if !s.Has("tessera_device_allocation_info", want...) {
		t.Errorf("no tessera_device_allocation_info%v in\n%v", want, s["tessera_device_allocation_info"])
	}
}

// TestAttributionShares: two pods holding shares of one GPU are two
// series with the share each claim holds (from the checkpoint where the
// kubelet does not say).
func TestAttributionShares(t *testing.T) {
	n := launch(t, &node{profile: "l4-4", sharing: publish.SharingCapacity, mps: true, metrics: metrics.New()})
	a, b := n.addShareClaim("a", "gpu-0", "7Gi"), n.addShareClaim("b", "gpu-0", "7Gi")
	for uid, r := range n.prepare(a, b).Claims {
		if r.GetError() != "" {
			t.Fatalf("prepare %s: %s", uid, r.GetError())
		}
	}
	ua, ub := use("pod-a", "a", "gpu-0"), use("pod-b", "b", "gpu-0")
	ub.ShareID = "share-b" // the kubelet says; for a it does not
	s := n.attribution(podresourcestest.Start(t), ua, ub)
	uuid := n.driver.Published().Devices["gpu-0"].GPU.UUID
	for _, want := range [][]string{
		{"pod", "pod-a", "claim", "a", "uuid", uuid, "share_id", "share-a"},
		{"pod", "pod-b", "claim", "b", "uuid", uuid, "share_id", "share-b"},
	} {
		if !s.Has("tessera_device_allocation_info", want...) {
			t.Errorf("no tessera_device_allocation_info%v in\n%v", want, s["tessera_device_allocation_info"])
		}
	}
}

// TestAttributionFollowsThePoll: the series are the last poll's: a pod
// that ended is gone after the next poll; a kubelet that stops answering
// leaves the last set for KeepFailed polls, each counted, then none.
func TestAttributionFollowsThePoll(t *testing.T) {
	n := launch(t, &node{profile: "l4-4", metrics: metrics.New()})
	for uid, r := range n.prepare(n.addClaim("a", "gpu-0"), n.addClaim("b", "gpu-1")).Claims {
		if r.GetError() != "" {
			t.Fatalf("prepare %s: %s", uid, r.GetError())
		}
	}
	srv := podresourcestest.Start(t)
	p := podresources.NewPoller(srv.Socket, names.DriverName, time.Hour, n.metrics.PodResourcesFailed)
	n.metrics.SetAllocationSource(func() []metrics.DeviceAllocation { return n.driver.Attribution(p.Current()) })
	scrape := func() metricstest.Snapshot { return metricstest.Scrape(t, n.metrics.Handler()) }
	series := func(s metricstest.Snapshot) int { return len(s["tessera_device_allocation_info"].GetMetric()) }

	srv.Set(podresourcestest.Response(use("pod-a", "a", "gpu-0"), use("pod-b", "b", "gpu-1")))
	p.Poll(n.ctx)
	if s := scrape(); series(s) != 2 || !s.Has("tessera_device_allocation_info", "pod", "pod-a") {
		t.Fatalf("two pods running: %v", s["tessera_device_allocation_info"])
	}
	srv.Set(podresourcestest.Response(use("pod-b", "b", "gpu-1")))
	p.Poll(n.ctx)
	if s := scrape(); series(s) != 1 || s.Has("tessera_device_allocation_info", "pod", "pod-a") {
		t.Errorf("pod-a ended, one poll later: %v", s["tessera_device_allocation_info"])
	}
	srv.Stop()
	for i := 1; i <= poll.KeepFailed; i++ {
		p.Poll(n.ctx)
		s := scrape()
		if !s.Has("tessera_device_allocation_info", "pod", "pod-b") {
			t.Errorf("after %d failed polls: pod-b gone already", i)
		}
		expect(t, "failed polls", s.Value("tessera_pod_resources_errors_total"), float64(i))
	}
	p.Poll(n.ctx)
	if s := scrape(); series(s) != 0 {
		t.Errorf("after %d failed polls: %v, want none", poll.KeepFailed+1, s["tessera_device_allocation_info"])
	}
}
