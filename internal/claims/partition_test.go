package claims

import (
	"testing"
	"time"
)

type partitionCall struct {
	op  PartitionOp
	err error
}

// TestPartitionCallsObserved: every backend partition call, from rollback
// and from the carve hook, reaches Config.ObservePartition.
func TestPartitionCallsObserved(t *testing.T) {
	e := newEnv(t, "dgx-h100-mig")
	m, res := e.start(nil)
	ctx := ctxFor(t)
	var calls []partitionCall
	m.cfg.ObservePartition = func(op PartitionOp, took time.Duration, err error) {
		if took < 0 {
			t.Errorf("%s took %v", op, took)
		}
		calls = append(calls, partitionCall{op, err})
	}
	var name string
	for _, n := range res.Order {
		if res.Devices[n].Partition != nil {
			name = n
			break
		}
	}
	if name == "" {
		t.Fatal("profile has no partitions")
	}
	entry := res.Devices[name]
	p := entry.Partition

	// Unprepare of a claim that carved its partition destroys it.
	if _, err := m.Prepare(ctx, allocated("mig", name)); err != nil {
		t.Fatal(err)
	}
	m.cp.Claims["uid-mig"].Devices[0].CreatedPartition = true
	if err := m.Unprepare(ctx, "uid-mig", "default", "mig"); err != nil {
		t.Fatal(err)
	}
	// The hook dynamic partitioning will carve through.
	if _, err := m.carvePartition(ctx, entry.GPU.UUID, p.Profile, p.Placement); err != nil {
		t.Fatal(err)
	}
	if _, err := m.carvePartition(ctx, "GPU-nonexistent", p.Profile, p.Placement); err == nil {
		t.Fatal("carve on an unknown GPU succeeded")
	}
	if len(calls) != 3 || calls[0].op != PartitionDestroy || calls[0].err != nil ||
		calls[1].op != PartitionCarve || calls[1].err != nil || calls[2].op != PartitionCarve || calls[2].err == nil {
		t.Errorf("observed %+v; want destroy ok, carve ok, carve error", calls)
	}
}
