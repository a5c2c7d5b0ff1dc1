package backend

import "context"

// ModeSwitcher is implemented by backends whose GPUs' partitions are a mode
// of the whole GPU (gpuvendor.Capabilities.PartitionModes: AMD compute
// partitions), where partitions are made and removed together by setting
// the mode rather than one by one with CreatePartition.
type ModeSwitcher interface {
	// SwitchMode sets the partition mode of the GPU with gpuUUID to mode
	// (a profile name of its inventory.Partitioning: SPX, DPX, QPX, CPX).
	// It returns once the driver took the change: the old mode's partitions
	// are gone, and the new mode's appear in Discover when the driver has
	// enumerated them, which may be later. Setting the mode the GPU is in
	// is not an error. It fails, changing nothing, where the driver refuses
	// (a mode its memory mode does not allow, a partition in use).
	SwitchMode(ctx context.Context, gpuUUID, mode string) error
}
