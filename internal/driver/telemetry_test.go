package driver

import (
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/metrics"
	"github.com/tessera-gpu/tessera/internal/metrics/metricstest"
	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/podresources/podresourcestest"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
	"github.com/tessera-gpu/tessera/internal/telemetry"
)

// telemetry polls the simulator's telemetry and the PodResources server
// once each and scrapes, as the agent wires them.
func (n *node) telemetry(srv *podresourcestest.Server, uses ...podresourcestest.Use) metricstest.Snapshot {
	n.t.Helper()
	pr := n.pollPods(srv, uses...)
	tp := telemetry.NewPoller(n.backend.ReadTelemetry, time.Hour, nil)
	tp.Poll(n.ctx)
	n.metrics.SetTelemetrySource(func() []metrics.DeviceTelemetry { return n.driver.Telemetry(tp.Current(), pr.Current()) })
	return metricstest.Scrape(n.t, n.metrics.Handler())
}

// A whole GPU held by one pod carries it; a MIG instance is its own
// device, with its own memory; the GPU of the MIG instance is named by
// its GPU name and holds nobody's labels.
func TestTelemetryLabels(t *testing.T) {
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
	gpuUUID, part := pub.Devices[whole].GPU.UUID, pub.Devices[mig].Partition
	migGPU, _ := names.ParentGPU(mig)
	dir := filepath.Join(n.dir, "sim")
	if err := sim.SetLoad(dir, gpuUUID, sim.Load{UtilizationPercent: 50, MemoryUsedBytes: 8 << 30}); err != nil {
		t.Fatal(err)
	}
	if err := sim.SetLoad(dir, part.UUID, sim.Load{UtilizationPercent: 100, MemoryUsedBytes: 2 << 30}); err != nil {
		t.Fatal(err)
	}
	s := n.telemetry(podresourcestest.Start(t), use("train-0", "train", whole), use("infer-0", "infer", mig))
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"tessera_gpu_utilization_ratio", []string{"node", "node-1", "device", whole, "uuid", gpuUUID, "namespace", "team-a", "pod", "train-0"}, 0.5},
		{"tessera_gpu_memory_used_bytes", []string{"device", whole, "pod", "train-0"}, 8 << 30},
		{"tessera_gpu_power_watts", []string{"device", whole, "pod", "train-0"}, 70 + 630*0.5},
		{"tessera_gpu_memory_used_bytes", []string{"device", mig, "uuid", part.UUID, "pod", "infer-0"}, 2 << 30},
		{"tessera_gpu_memory_total_bytes", []string{"device", mig, "uuid", part.UUID}, float64(part.MemoryBytes)},
		{"tessera_gpu_memory_used_bytes", []string{"device", migGPU, "uuid", pub.Devices[mig].GPU.UUID, "pod", ""}, 2 << 30},
	}
	for _, c := range checks {
		if !s.Has(c.name, c.labels...) {
			t.Errorf("no %s%v in\n%v", c.name, c.labels, s[c.name])
			continue
		}
		if got := s.Value(c.name, c.labels...); got < c.want-1e-9 || got > c.want+1e-9 {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	inv, err := n.backend.Discover(n.ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := len(inv.GPUs)
	for _, g := range inv.GPUs {
		want += len(g.Partitions)
	}
	if got := len(s["tessera_gpu_memory_total_bytes"].GetMetric()); got != want {
		t.Errorf("%d memory series, want one per GPU and partition (%d)", got, want)
	}
}

// Two pods sharing a GPU: the GPU's numbers are nobody's in particular.
func TestTelemetrySharedGPUHasNoPod(t *testing.T) {
	n := launch(t, &node{profile: "l4-4", sharing: publish.SharingCapacity, mps: true, metrics: metrics.New()})
	a, b := n.addShareClaim("a", "gpu-0", "7Gi"), n.addShareClaim("b", "gpu-0", "7Gi")
	for uid, r := range n.prepare(a, b).Claims {
		if r.GetError() != "" {
			t.Fatalf("prepare %s: %s", uid, r.GetError())
		}
	}
	s := n.telemetry(podresourcestest.Start(t), use("pod-a", "a", "gpu-0"), use("pod-b", "b", "gpu-0"))
	if !s.Has("tessera_gpu_utilization_ratio", "device", "gpu-0", "namespace", "", "pod", "") {
		t.Errorf("no pod-less series of the shared gpu-0 in\n%v", s["tessera_gpu_utilization_ratio"])
	}
	for _, pod := range []string{"pod-a", "pod-b"} {
		if s.Has("tessera_gpu_utilization_ratio", "pod", pod) {
			t.Errorf("the shared GPU's utilization is labelled with %s", pod)
		}
	}
}

// BenchmarkTelemetry: one telemetry poll of a simulated DGX H100 (8 GPUs,
// one loaded), and one poll with one scrape of /metrics; scrape-only
// without telemetry is the baseline the scrape's share is read against.
func BenchmarkTelemetry(b *testing.B) {
	n := launch(b, &node{profile: "dgx-h100", metrics: metrics.New(), poll: time.Hour})
	gpu := n.driver.Published().Devices["gpu-0"].GPU.UUID
	if err := sim.SetLoad(filepath.Join(n.dir, "sim"), gpu, sim.Load{UtilizationPercent: 70, MemoryUsedBytes: 30 << 30}); err != nil {
		b.Fatal(err)
	}
	tp := telemetry.NewPoller(n.backend.ReadTelemetry, time.Hour, nil)
	h := n.metrics.Handler()
	scrape := func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		if w.Code != 200 {
			b.Fatalf("scrape: %d", w.Code)
		}
	}
	b.Run("scrape-without-telemetry", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			scrape()
		}
	})
	n.metrics.SetTelemetrySource(func() []metrics.DeviceTelemetry { return n.driver.Telemetry(tp.Current(), nil) })
	b.Run("poll", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tp.Poll(n.ctx)
		}
	})
	b.Run("poll+scrape", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			tp.Poll(n.ctx)
			scrape()
		}
	})
	if got := len(tp.Current()); got != 8 {
		b.Errorf("%d samples, want 8", got)
	}
}

// BenchmarkMetrics64Claims: a node with 64 claims prepared, each its own
// pod's: the telemetry poll, the attribution poll and one scrape of
// /metrics with both, and the scrape's size (metrics-bytes; the goal is
// under 100 KiB). l4-4 with --sharing=capacity holds 64 shares (16 of 1Gi
// per L4); a DGX H100 cannot hold 64 claims of its own (8 GPUs, 56 MIG
// instances of 1g.10gb in static MIG), so dgx-h100-mig holds 56.
func BenchmarkMetrics64Claims(b *testing.B) {
	for _, tc := range []struct {
		name    string
		node    *node
		devices func(n *node) []string
	}{
		{"l4-4-capacity-64", &node{profile: "l4-4", sharing: publish.SharingCapacity, mps: true}, func(*node) []string {
			var ds []string
			for i := range 64 {
				ds = append(ds, names.GPU(i%4))
			}
			return ds
		}},
		{"dgx-h100-mig-56", &node{profile: "dgx-h100-mig"}, func(n *node) []string {
			var ds []string
			for _, name := range n.driver.Published().Order {
				if e := n.driver.Published().Devices[name]; e.Partition != nil {
					ds = append(ds, name)
				}
			}
			return ds
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tc.node.metrics, tc.node.poll = metrics.New(), time.Hour
			n := launch(b, tc.node)
			srv := podresourcestest.Start(b)
			var claims []*drapbv1.Claim
			var uses []podresourcestest.Use
			for i, dev := range tc.devices(n) {
				name := fmt.Sprintf("c%d", i)
				var c *drapbv1.Claim
				share := ""
				if tc.node.sharing == publish.SharingCapacity {
					c, share = n.addShareClaim(name, dev, "1Gi"), "share-"+name
				} else {
					c = n.addClaim(name, dev)
				}
				claims = append(claims, c)
				uses = append(uses, podresourcestest.Use{Namespace: "team", Pod: "pod-" + name, Container: "main", ClaimNamespace: "default",
					Claim: name, Driver: names.DriverName, Pool: "node-1", Device: dev, ShareID: share})
			}
			for uid, r := range n.prepare(claims...).Claims {
				if r.GetError() != "" {
					b.Fatalf("prepare %s: %s", uid, r.GetError())
				}
			}
			pr := n.pollPods(srv, uses...)
			tp := telemetry.NewPoller(n.backend.ReadTelemetry, time.Hour, nil)
			tp.Poll(n.ctx)
			n.metrics.SetAllocationSource(func() []metrics.DeviceAllocation { return n.driver.Attribution(pr.Current()) })
			n.metrics.SetTelemetrySource(func() []metrics.DeviceTelemetry { return n.driver.Telemetry(tp.Current(), pr.Current()) })
			h := n.metrics.Handler()
			scrape := func() int {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
				if w.Code != 200 {
					b.Fatalf("scrape: %d", w.Code)
				}
				return w.Body.Len()
			}
			if s := metricstest.Scrape(b, h); len(s["tessera_device_allocation_info"].GetMetric()) != len(claims) {
				b.Fatalf("%d allocation series, want %d", len(s["tessera_device_allocation_info"].GetMetric()), len(claims))
			}
			size := scrape()
			b.Run("telemetry-poll", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					tp.Poll(n.ctx)
				}
			})
			b.Run("attribution-poll", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					pr.Poll(n.ctx)
				}
			})
			b.Run("scrape", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					scrape()
				}
				b.ReportMetric(float64(size), "metrics-bytes")
			})
		})
	}
}
