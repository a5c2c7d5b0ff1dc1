package claims

import (
	"context"
	"time"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// PartitionOp names a backend partition call, as Config.ObservePartition
// reports it.
type PartitionOp string

const (
	PartitionCarve   PartitionOp = "carve"
	PartitionDestroy PartitionOp = "destroy"
	// PartitionMode is the write of a GPU's partition mode (AMD compute
	// partitions: modes.go), which makes and removes its partitions.
	PartitionMode PartitionOp = "mode"
)

// destroyPartition is the only way the manager destroys a partition, so
// that every call is observed.
func (m *Manager) destroyPartition(ctx context.Context, gpuUUID, partitionUUID string) error {
	return m.observePartition(PartitionDestroy, func() error {
		return m.cfg.Backend.DestroyPartition(ctx, gpuUUID, partitionUUID)
	})
}

// carvePartition is the way the manager is to carve partitions: prepare
// does not carve yet (partitions are static), and dynamic partitioning calls
// this so that carves are observed like destroys.
func (m *Manager) carvePartition(ctx context.Context, gpuUUID, profile string, at inventory.Placement) (*inventory.Partition, error) {
	var p *inventory.Partition
	err := m.observePartition(PartitionCarve, func() error {
		var err error
		p, err = m.cfg.Backend.CreatePartition(ctx, gpuUUID, profile, at)
		return err
	})
	return p, err
}

func (m *Manager) observePartition(op PartitionOp, call func() error) error {
	start := time.Now()
	err := call()
	if m.cfg.ObservePartition != nil {
		m.cfg.ObservePartition(op, time.Since(start), err)
	}
	return err
}
