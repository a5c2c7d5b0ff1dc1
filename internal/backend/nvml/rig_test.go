//go:build cgo && linux

package nvml

import (
	"context"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"k8s.io/klog/v2/ktesting"

	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/sim"
)

// rig is a backend on a mock machine whose first GPU follows the MIG
// hardware rules (migHW), for the partitioning tests.
type rig struct {
	ctx context.Context
	b   *Backend
	s   *server.Server
	d   *server.Device
	hw  *migHW
	gpu string // UUID of d
}

// h100Rig is the DGX H100 double (its profile table is the real one); GPU
// 0 has the MIG rules and the given mode.
func h100Rig(t *testing.T, migOn bool) *rig {
	t.Helper()
	m, err := sim.Profile("dgx-h100", "node-1")
	if err != nil {
		t.Fatal(err)
	}
	s, root := dgxH100(t, m)
	return newRig(t, s, root, migOn)
}

// a100Rig is one A100 40GB with the mock's profile table (which has CI
// profiles smaller than their GI) and the MIG rules; Ampere, so MIG mode
// changes wait for a reset.
func a100Rig(t *testing.T, migOn bool) *rig {
	t.Helper()
	s, root := newMachine(t, gpus.Multiple(1, gpus.A100_SXM4_40GB), dgxA100Slots()[:1])
	return newRig(t, s, root, migOn)
}

func newRig(t *testing.T, s *server.Server, root string, migOn bool) *rig {
	t.Helper()
	d := s.Devices[0].(*server.Device)
	hw := newMIGHW(t, d)
	hw.boot(migOn)
	_, ctx := ktesting.NewTestContext(t)
	return &rig{ctx: ctx, b: newBackend(t, s, root), s: s, d: d, hw: hw, gpu: d.UUID}
}

// gpuNow is the rig's GPU as Discover publishes it now; it must be healthy,
// or a change left the GPU in a state Discover objects to.
func (r *rig) gpuNow(t *testing.T) inventory.GPU {
	t.Helper()
	n, err := r.b.Discover(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range n.GPUs {
		if g.UUID == r.gpu {
			if g.Health.State != inventory.Healthy {
				t.Fatalf("GPU health %+v", g.Health)
			}
			return g
		}
	}
	t.Fatalf("GPU %s not discovered", r.gpu)
	return inventory.GPU{}
}

// create carves or fails the test.
func (r *rig) create(t *testing.T, profile string, start int) *inventory.Partition {
	t.Helper()
	p, err := r.b.CreatePartition(r.ctx, r.gpu, profile, inventory.Placement{Start: start})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
