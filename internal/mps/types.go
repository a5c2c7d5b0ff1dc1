package mps

// The MPS daemons a backend runs (backend.Sharer): what a claim asks of one,
// and what the backend reports back. They live here, with the daemons,
// so that this package does not import the backend interface that
// lists them.

// DaemonSpec is one claim's MPS control daemon.
type DaemonSpec struct {
	// ID names the daemon: the claim's UID. At most one daemon per ID runs.
	ID string
	// Devices are the UUIDs (GPU-… or MIG-…) the daemon serves, in the
	// order the claim lists them: its CUDA_VISIBLE_DEVICES.
	Devices []string
	// ActiveThreadPercentage is the default for every client, 1-100; 0
	// leaves MPS's own default (no cap).
	ActiveThreadPercentage int32
	// PinnedMemoryLimits is the default pinned device memory limit per
	// device UUID in bytes; a device not listed has no limit.
	PinnedMemoryLimits map[string]int64
}

// NamespaceSpec is an MPS v3 namespace in a daemon's server: the
// clients of one share, with its limits.
type NamespaceSpec struct {
	// Name is unique within the daemon: letters, digits, '-', '_', '.',
	// at most 63.
	Name string
	// ActiveThreadPercentage caps the namespace's clients, 1-100; 0: no cap.
	ActiveThreadPercentage int32
	// PinnedMemoryLimit caps their pinned device memory in bytes; 0: none.
	PinnedMemoryLimit int64
}

// Daemon is a running daemon.
type Daemon struct {
	ID string
	// PipeDir is the host directory of the daemon's pipes, its control
	// pipe among them.
	PipeDir string
	// Namespaces is true where the daemon runs MPS v3: each share gets a
	// namespace of its own (backend.Sharer.EnsureMPSNamespace), and containers
	// mount a namespace's directory, never PipeDir.
	Namespaces bool
	// ClientDir is what the containers of the claim the daemon was started
	// for mount at their CUDA_MPS_PIPE_DIRECTORY: PipeDir under legacy MPS,
	// the server's default namespace under v3.
	ClientDir string
	// LogDir holds the daemon's logs (CUDA_MPS_LOG_DIRECTORY).
	LogDir string
	// PID of the daemon process; 0 where the launcher does not know it.
	PID int
	// Adopted is true when StartMPS found the daemon already running (a
	// restart of the agent) instead of starting it.
	Adopted bool
}

// DaemonState is a daemon the backend knows of.
type DaemonState struct {
	ID      string
	Running bool
}
