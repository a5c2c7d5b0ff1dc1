package isolation

import "fmt"

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

// rank orders the levels, weakest first.
var rank = map[Level]int{None: 0, Process: 1, Kernel: 2}

// ParseLevel parses a level's name (a flag value).
func ParseLevel(s string) (Level, error) {
	if _, ok := rank[Level(s)]; !ok {
		return "", fmt.Errorf("%q is not a memory isolation level (none, process or kernel)", s)
	}
	return Level(s), nil
}

// AtLeast reports whether l holds at least as strongly as min.
func (l Level) AtLeast(min Level) bool { return rank[l] >= rank[min] }
