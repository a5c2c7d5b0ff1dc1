package publish_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/alloctest"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// BenchmarkFleetSharing is what --sharing=capacity costs the scheduler next
// to --sharing=none: one scheduling cycle (PreFilter + Filter of every
// node, as BenchmarkFleet) of a pod with one claim over a fleet of 4x L4
// nodes. Node i was filled beforehand, by the allocator on a template node,
// with i%5 claims of 7Gi: with none each took a whole L4 (a node with four
// is full), with capacity they are shares packed three to an L4. The
// claims: one asking 7Gi (a share, or a whole L4 without sharing) and one
// asking no capacity (a whole L4 either way).
func BenchmarkFleetSharing(b *testing.B) {
	ctx := context.Background()
	const nodes = 1000
	for _, mode := range []publish.Sharing{publish.SharingNone, publish.SharingCapacity} {
		classes, err := alloctest.Classes()
		if err != nil {
			b.Fatal(err)
		}
		objs, _ := alloctest.PublishSimWith(b, "l4-4", "template", publish.Options{Partitioning: publish.Static, Sharing: mode})
		// The fill patterns: k = 0..4 claims of 7Gi on the template node.
		tmpl := alloctest.NewCluster(objs, classes)
		var patterns [][]resourceapi.AllocationResult
		var done []resourceapi.AllocationResult
		for k := range 5 {
			patterns = append(patterns, append([]resourceapi.AllocationResult(nil), done...))
			if k == 4 {
				break
			}
			res, err := tmpl.Allocate(ctx, "template", share(fmt.Sprintf("fill-%d", k), "nvidia.gpu.tessera.dev", "memory", "7Gi"))
			if err != nil || res == nil {
				b.Fatalf("fill %d: %v", k, err)
			}
			done = append(done, res[0])
		}
		var all []*resourceapi.ResourceSlice
		var ns []*v1.Node
		for i := range nodes {
			name := fmt.Sprintf("l4-%04d", i)
			all = append(all, alloctest.CloneNode(objs, "template", name)...)
			ns = append(ns, alloctest.Node(name))
		}
		c := alloctest.NewCluster(all, classes)
		for i, n := range ns {
			for _, r := range patterns[i%5] {
				c.MarkResult(n.Name, r)
			}
		}
		for _, cc := range []struct {
			name  string
			claim *resourceapi.ResourceClaim
		}{
			{"7Gi", share("bench", "nvidia.gpu.tessera.dev", "memory", "7Gi")},
			{"whole", share("bench", "nvidia.gpu.tessera.dev")},
		} {
			b.Run(fmt.Sprintf("nodes=%d/sharing=%s/claim=%s", nodes, mode, cc.name), func(b *testing.B) {
				claims := []*resourceapi.ResourceClaim{cc.claim}
				fit, err := c.Cycle(ctx, ns, claims)
				if err != nil {
					b.Fatal(err)
				}
				// Without sharing a node with four 7Gi claims is full; with
				// capacity every node has room for both claims.
				want := nodes
				if mode == publish.SharingNone {
					want = nodes * 4 / 5
				}
				if fit != want {
					b.Fatalf("claim fits %d nodes, want %d", fit, want)
				}
				b.ReportAllocs()
				runtime.GC()
				for b.Loop() {
					if _, err := c.Cycle(ctx, ns, claims); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/nodes/1e3, "us/node")
				b.ReportMetric(float64(fit), "fit-nodes")
			})
		}
	}
}
