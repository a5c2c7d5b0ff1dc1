package driver

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/publish"
	"github.com/tessera-gpu/tessera/internal/sim"
)

// stubborn refuses to destroy one partition until let go, like a MIG
// device a process outside Kubernetes still has open.
type stubborn struct {
	backend.Backend
	uuid string
	free atomic.Bool
}

func (s *stubborn) DestroyPartition(ctx context.Context, gpu, uuid string) error {
	if uuid == s.uuid && !s.free.Load() {
		return errors.New("in use")
	}
	return s.Backend.DestroyPartition(ctx, gpu, uuid)
}

// TestWithheldOrphanReturnsWhenItGoes: an orphan the start-up sweep cannot
// destroy has its memory slices withheld in the published counter set (the
// scheduler would otherwise keep choosing placements prepare must refuse);
// once it can go, the retry destroys it and the slices come back.
func TestWithheldOrphanReturnsWhenItGoes(t *testing.T) {
	m, err := sim.Profile("dgx-h100-mig", "node-1")
	if err != nil {
		t.Fatal(err)
	}
	stuck := m.Node.GPUs[6].Partitions[0]
	s := &stubborn{uuid: stuck.UUID}
	n := launch(t, &node{profile: "dgx-h100-mig", partitioning: publish.Dynamic, wrap: func(b backend.Backend) backend.Backend {
		s.Backend = b
		return s
	}})
	gpu := ""
	for _, md := range n.driver.Published().Modes {
		if md.UUID == m.Node.GPUs[6].UUID {
			gpu = md.Device
			if !slices.Equal(md.Withheld, []string{stuck.UUID}) {
				t.Errorf("%s withholds %v, want the stuck %s", md.Device, md.Withheld, stuck.UUID)
			}
		}
	}
	// published returns the counters of gpu's set at 0 in the API server.
	zero := func() []string {
		l, err := n.client.ResourceV1().ResourceSlices().List(n.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, sl := range l.Items {
			for _, cs := range sl.Spec.SharedCounters {
				if cs.Name != gpu {
					continue
				}
				for name, c := range cs.Counters {
					if c.Value.IsZero() {
						out = append(out, name)
					}
				}
			}
		}
		slices.Sort(out)
		return out
	}
	want := []string{"memory-slice-" + itoa(stuck.Placement.Start)}
	waitFor(t, func() bool { return slices.Equal(zero(), want) })
	if inv, _ := n.backend.Discover(n.ctx); countPartitions(inv.GPUs) != 1 {
		t.Fatalf("%d partitions after start, want only the stuck one", countPartitions(inv.GPUs))
	}

	s.free.Store(true)
	waitFor(t, func() bool { return len(zero()) == 0 })
	if inv, _ := n.backend.Discover(n.ctx); countPartitions(inv.GPUs) != 0 {
		t.Errorf("%d partitions after the retry, want none", countPartitions(inv.GPUs))
	}
	if withholds(n.driver.Published()) {
		t.Errorf("still withholding: %+v", n.driver.Published().Modes)
	}
}

func countPartitions(gs []inventory.GPU) int {
	n := 0
	for _, g := range gs {
		n += len(g.Partitions)
	}
	return n
}
