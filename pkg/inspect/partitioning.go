package inspect

// Partitioning modes of a GPU.
const (
	PartitioningNone    = "none"    // published whole only
	PartitioningStatic  = "static"  // the partitions an operator cut
	PartitioningDynamic = "dynamic" // every placement, on a counter set named like the GPU
)
