package driver

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/flowcontrol"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/tessera-gpu/tessera/internal/names"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// BenchmarkPrepareUnprepareDynamic is BenchmarkPrepareUnprepare on a node
// with dynamic partitioning: each cycle carves the claim's MIG partitions
// (turning MIG mode on) and destroys them (turning it off).
func BenchmarkPrepareUnprepareDynamic(b *testing.B) {
	for _, tc := range []struct {
		name    string
		devices []string
	}{
		{"1g.10gb", []string{"gpu-7-mig-1g-10gb-5"}},
		{"3g.40gb+4g.40gb", []string{"gpu-7-mig-3g-40gb-4", "gpu-7-mig-4g-40gb-0"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			// No republish while measuring: every carve and destroy changes
			// the sim's generation, and the fake clientset, which cannot
			// generateName, re-creates all slices on each republish. A real
			// API server sees identical slices (the pool generation stays 1
			// in the local cluster), so this is the agent's own cost.
			n := launch(b, &node{profile: "dgx-h100", partitioning: publish.Dynamic, poll: time.Hour})
			benchPrepareUnprepare(b, n, tc.devices...)
		})
	}
}

// BenchmarkPrepareUnprepare measures one NodePrepareResources plus one
// NodeUnprepareResources through the agent's real gRPC socket: claim GET from
// the (fake) API server, checkpoint writes with fsync, CDI spec write and
// validation, spec removal.
func BenchmarkPrepareUnprepare(b *testing.B) {
	for _, gpus := range []int{1, 8} {
		b.Run(fmt.Sprintf("gpus=%d", gpus), func(b *testing.B) {
			var devices []string
			for i := 0; i < gpus; i++ {
				devices = append(devices, fmt.Sprintf("gpu-%d", i))
			}
			benchPrepareUnprepare(b, newBenchNode(b, "dgx-h100"), devices...)
		})
	}
}

// benchPrepareUnprepare times prepare plus unprepare of one claim for
// devices on n.
func benchPrepareUnprepare(b *testing.B, n *node, devices ...string) {
	benchCycle(b, n, n.addClaim("bench", devices...))
}

// benchCycle times prepare plus unprepare of claim on n.
func benchCycle(b *testing.B, n *node, claim *drapbv1.Claim) {
	dra := n.dra()
	b.ReportAllocs()
	var prep, unprep time.Duration
	for b.Loop() {
		start := time.Now()
		resp, err := dra.NodePrepareResources(n.ctx, &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{claim}})
		if err != nil || resp.Claims[claim.Uid].GetError() != "" {
			b.Fatalf("prepare: %v %v", err, resp)
		}
		mid := time.Now()
		un, err := dra.NodeUnprepareResources(n.ctx, &drapbv1.NodeUnprepareResourcesRequest{Claims: []*drapbv1.Claim{claim}})
		if err != nil || un.Claims[claim.Uid].GetError() != "" {
			b.Fatalf("unprepare: %v %v", err, un)
		}
		prep, unprep = prep+mid.Sub(start), unprep+time.Since(mid)
	}
	b.ReportMetric(float64(prep.Microseconds())/float64(b.N), "prepare-us")
	b.ReportMetric(float64(unprep.Microseconds())/float64(b.N), "unprepare-us")
}

// BenchmarkPrepareThroughput is the kubelet starting pods on a busy node:
// 8 NodePrepareResources/NodeUnprepareResources cycles in flight at once,
// each for its own claim of one H100 (so none conflict). claims/s counts
// prepares (each followed by its unprepare).
func BenchmarkPrepareThroughput(b *testing.B) {
	b.Run("no-limit", func(b *testing.B) { benchThroughput(b, newBenchNode(b, "dgx-h100")) })
	// default-limit: claim GETs pass client-go's token bucket at the
	// agent's default QPS and burst, as its real client's do; run it long
	// enough (-benchtime=10s) that the burst is a small part.
	b.Run("default-limit", func(b *testing.B) {
		n := newBenchNode(b, "dgx-h100")
		limit := flowcontrol.NewTokenBucketRateLimiter(DefaultKubeAPIQPS, DefaultKubeAPIBurst)
		n.client.PrependReactor("get", "resourceclaims", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
			limit.Accept()
			return false, nil, nil
		})
		benchThroughput(b, n)
	})
}

func benchThroughput(b *testing.B, n *node) {
	var claims []*drapbv1.Claim
	for i := range 8 {
		claims = append(claims, n.addClaim(fmt.Sprintf("bench-%d", i), fmt.Sprintf("gpu-%d", i)))
	}
	dra := n.dra()
	var next atomic.Int32
	b.SetParallelism((8 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		claim := claims[int(next.Add(1)-1)%len(claims)]
		for pb.Next() {
			resp, err := dra.NodePrepareResources(n.ctx, &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{claim}})
			if err != nil || resp.Claims[claim.Uid].GetError() != "" {
				b.Errorf("prepare: %v %v", err, resp)
				return
			}
			un, err := dra.NodeUnprepareResources(n.ctx, &drapbv1.NodeUnprepareResourcesRequest{Claims: []*drapbv1.Claim{claim}})
			if err != nil || un.Claims[claim.Uid].GetError() != "" {
				b.Errorf("unprepare: %v %v", err, un)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
}

// BenchmarkPrepareUnprepareSharing is BenchmarkPrepareUnprepare for one
// A100 with each sharing strategy: time-slicing sets the GPU's interval at
// prepare and restores it at unprepare; MPS starts the claim's control
// daemon (the simulator's stand-in, a real process speaking the control
// protocol) and stops it.
func BenchmarkPrepareUnprepareSharing(b *testing.B) {
	for _, tc := range []struct{ name, config string }{
		{"plain", ""},
		{"time-sliced", `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicing":{"interval":"Long"}}}`},
		{"mps", `{"apiVersion":"gpu.tessera.dev/v1alpha1","kind":"GpuConfig","sharing":{"strategy":"MPS","mps":{"defaultActiveThreadPercentage":50,"defaultPinnedDeviceMemoryLimit":"10Gi"}}}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			n := launch(b, &node{profile: "mixed-inference", mps: true})
			claim := n.addConfiguredClaim("bench", tc.config, "gpu-0")
			benchCycle(b, n, claim)
		})
	}
}

// BenchmarkStartToPublished is an agent's start on an 8-GPU node until
// every device is in the (fake) API server's ResourceSlices: discovery,
// checkpoint recovery, building the slices, the helper's publication.
func BenchmarkStartToPublished(b *testing.B) {
	for _, profile := range []string{"dgx-h100", "mi300x-8"} {
		b.Run(profile, func(b *testing.B) {
			for b.Loop() {
				n := newBenchNode(b, profile)
				want := len(n.driver.Published().Order)
				for {
					l, err := n.client.ResourceV1().ResourceSlices().List(n.ctx, metav1.ListOptions{})
					got := 0
					for _, s := range l.Items {
						got += len(s.Spec.Devices)
					}
					if err == nil && got == want {
						break
					}
					time.Sleep(time.Millisecond)
				}
				n.stop()
			}
		})
	}
}

// BenchmarkPrepareUnprepareShare is BenchmarkPrepareUnprepare for a 7Gi
// share of an L4 on the R615 node (its MPS v3 namespace created and
// deleted each time, in the GPU's running daemon), without and with the
// memory limit hook: with it the
// share's spec names the hook and the unprepare releases the claim's
// records, the prepare-side cost of kernel limits (the limit itself is set
// by the runtime, BenchmarkHook in cmd/tessera-cdi-hook).
func BenchmarkPrepareUnprepareShare(b *testing.B) {
	for _, hook := range []bool{false, true} {
		b.Run(fmt.Sprintf("hook=%v", hook), func(b *testing.B) {
			n := launch(b, &node{profile: "l4-4-r615", sharing: publish.SharingCapacity, mps: true, limitHook: hook})
			// Another share keeps the GPU's MPS daemon up, as on a busy
			// node: the cycle is the share's own work, not a daemon's start.
			keeper := n.addShareClaim("keeper", "gpu-0", "1Gi")
			if r := n.prepare(keeper).Claims[keeper.Uid]; r.GetError() != "" {
				b.Fatal(r.GetError())
			}
			claim := n.addShareClaim("bench", "gpu-0", "7Gi")
			benchCycle(b, n, claim)
		})
	}
}

// BenchmarkPrepareNCCLTopo is an 8-GPU claim's prepare and
// unprepare on a DGX H100, without and with the NCCL topology file: what
// writing (and checking nothing more than building) the file, its mount and
// its removal add.
func BenchmarkPrepareNCCLTopo(b *testing.B) {
	gpus := []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7"}
	for _, tc := range []struct{ name, config string }{
		{"plain", ""},
		{"topo", ncclTopoConfig},
	} {
		b.Run(tc.name, func(b *testing.B) {
			n := launch(b, &node{profile: "dgx-h100"})
			claim := n.addConfiguredClaim("bench", tc.config, gpus...)
			benchCycle(b, n, claim)
		})
	}
}

// BenchmarkPrepareUnprepareMetadata is BenchmarkPrepareUnprepare with and
// without --device-metadata: what writing each prepared device's metadata
// file and its CDI spec (the helper's) and building its attributes (the
// agent's) adds to a prepare, and removing them to an unprepare.
func BenchmarkPrepareUnprepareMetadata(b *testing.B) {
	for _, gpus := range []int{1, 8} {
		for _, on := range []bool{false, true} {
			// Short names: the socket's path under TMPDIR holds them, and
			// a unix socket's path may be no longer than 108 bytes.
			b.Run(fmt.Sprintf("gpus=%d/%s", gpus, map[bool]string{false: "plain", true: "metadata"}[on]), func(b *testing.B) {
				var devices []string
				for i := 0; i < gpus; i++ {
					devices = append(devices, fmt.Sprintf("gpu-%d", i))
				}
				benchPrepareUnprepare(b, launch(b, &node{profile: "dgx-h100", metadata: on}), devices...)
			})
		}
	}
}

// BenchmarkPrepareUnprepareVFIO is one claim of a GPU passed through to a
// virtual machine on the simulator, through the agent's socket: the
// IOMMU group read and checked, the checkpoint's intent saved, the
// driver_override, unbind and bind written to the simulated sysfs (whose
// driver links move as the kernel's would), the spec written and the
// node's devices built again; then all of it undone. A real kernel's
// unbind and bind (an H100's re-initialisation by nvidia) is not in it.
func BenchmarkPrepareUnprepareVFIO(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("metadata=%v", on), func(b *testing.B) {
			n := launch(b, &node{profile: "dgx-h100", passthrough: true, metadata: on, poll: time.Hour})
			benchCycle(b, n, n.addClassClaim("bench", names.VFIOClass, "", "gpu-3"))
		})
	}
}
