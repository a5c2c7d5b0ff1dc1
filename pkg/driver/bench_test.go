package driver

import (
	"fmt"
	"testing"

	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
)

// BenchmarkPrepareUnprepare measures one NodePrepareResources plus one
// NodeUnprepareResources through the agent's real gRPC socket: claim GET from
// the (fake) API server, checkpoint writes with fsync, CDI spec write and
// validation, spec removal.
func BenchmarkPrepareUnprepare(b *testing.B) {
	for _, gpus := range []int{1, 8} {
		b.Run(fmt.Sprintf("gpus=%d", gpus), func(b *testing.B) {
			n := newBenchNode(b, "dgx-h100")
			var devices []string
			for i := 0; i < gpus; i++ {
				devices = append(devices, fmt.Sprintf("gpu-%d", i))
			}
			claim := n.addClaim("bench", devices...)
			dra := n.dra()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				resp, err := dra.NodePrepareResources(n.ctx, &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{claim}})
				if err != nil || resp.Claims[claim.Uid].GetError() != "" {
					b.Fatalf("prepare: %v %v", err, resp)
				}
				un, err := dra.NodeUnprepareResources(n.ctx, &drapbv1.NodeUnprepareResourcesRequest{Claims: []*drapbv1.Claim{claim}})
				if err != nil || un.Claims[claim.Uid].GetError() != "" {
					b.Fatalf("unprepare: %v %v", err, un)
				}
			}
		})
	}
}
