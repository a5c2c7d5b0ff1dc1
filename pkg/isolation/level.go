package isolation

// Level is how a share's memory limit is held: the published
// memoryIsolation attribute of a device.
type Level string

const (
	// Kernel: a cgroup limit on the workload, which it cannot lift.
	Kernel Level = "kernel"
	// Process: limits the workload's processes apply to themselves (MPS
	// client variables); an uncooperative process escapes them.
	Process Level = "process"
	// None: the scheduler's accounting only.
	None Level = "none"
)
