package channelpool

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/alloctest"
)

// rack is an NVL72's 18 trays, each with its GB200 slices as the agent
// publishes them and its domain label, and the domain's channel pool.
func rack(b *testing.B) (*alloctest.Cluster, []*v1.Node) {
	b.Helper()
	classes, err := alloctest.Classes()
	if err != nil {
		b.Fatal(err)
	}
	var all []*resourceapi.ResourceSlice
	var nodes []*v1.Node
	for i := range 18 {
		name := fmt.Sprintf("tray-%02d", i)
		s, _ := alloctest.PublishSim(b, "gb200-nvl72-tray", name)
		all = append(all, s...)
		nodes = append(nodes, tray(name, domainA))
	}
	p, err := Pool(domainA, DefaultChannels)
	if err != nil {
		b.Fatal(err)
	}
	all = append(all, &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{
		Driver: "gpu.tessera.dev", Pool: resourceapi.ResourcePool{Name: PoolName(domainA), ResourceSliceCount: 1},
		NodeSelector: p.NodeSelector, Devices: p.Slices[0].Devices,
	}})
	for i := range all {
		all[i].Name = fmt.Sprintf("slice-%d", i)
	}
	return alloctest.NewCluster(all, classes), nodes
}

// BenchmarkWorkerCycle is one scheduling cycle of a job's worker over the
// rack's 18 trays (the scheduler's PreFilter and a Filter per tray, the
// real allocator): a worker with its own 4-GPU claim alone ("independent",
// a pod of no job) against the job's first worker, which also allocates
// the job's channel claim ("first"). A later worker's channel claim is
// allocated already: the scheduler checks only its node selector.
func BenchmarkWorkerCycle(b *testing.B) {
	ctx := context.Background()
	c, nodes := rack(b)
	gpus := func() *resourceapi.ResourceClaim {
		return alloctest.Claim("gpus", alloctest.Request{Name: "gpu", Class: "nvidia.gpu.tessera.dev", Count: 4})
	}
	for _, tc := range []struct {
		name   string
		claims func() []*resourceapi.ResourceClaim
	}{
		{"independent", func() []*resourceapi.ResourceClaim { return []*resourceapi.ResourceClaim{gpus()} }},
		{"first", func() []*resourceapi.ResourceClaim { return []*resourceapi.ResourceClaim{gpus(), group("job")} }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			claims := tc.claims()
			for b.Loop() {
				fit, err := c.Cycle(ctx, nodes, claims)
				if err != nil || fit != len(nodes) {
					b.Fatalf("fits %d of %d trays: %v", fit, len(nodes), err)
				}
			}
		})
	}
}
