package backend

import (
	"context"
	"errors"
	"fmt"
)

// Sharing settings a backend applies to its GPUs. The vendor-neutral layer
// (internal/sharing, internal/claims) decides what a claim asked for and records it in
// the checkpoint before calling these; backends only touch the hardware and
// the daemons, and every call is idempotent so recovery can repeat it.

// ErrSharingNotSupported is wrapped by the errors of sharing calls a GPU
// cannot do (MPS on an AMD GPU, a time-slice interval where the hardware has
// a fixed one).
var ErrSharingNotSupported = errors.New("not supported by this GPU")

// TimeSlice is a GPU's compute time-slice setting, numbered as NVIDIA's
// compute policy numbers them (nvidia-smi compute-policy --set-timeslice).
type TimeSlice int

const (
	TimeSliceDefault TimeSlice = iota
	TimeSliceShort
	TimeSliceMedium
	TimeSliceLong
)

// String is the API's name for the interval.
func (t TimeSlice) String() string {
	switch t {
	case TimeSliceDefault:
		return "Default"
	case TimeSliceShort:
		return "Short"
	case TimeSliceMedium:
		return "Medium"
	case TimeSliceLong:
		return "Long"
	}
	return fmt.Sprintf("TimeSlice(%d)", int(t))
}

// MPSDaemonSpec is one claim's MPS control daemon.
type MPSDaemonSpec struct {
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

// MPSNamespaceSpec is an MPS v3 namespace in a daemon's server: the
// clients of one share, with its limits.
type MPSNamespaceSpec struct {
	// Name is unique within the daemon: letters, digits, '-', '_', '.',
	// at most 63.
	Name string
	// ActiveThreadPercentage caps the namespace's clients, 1-100; 0: no cap.
	ActiveThreadPercentage int32
	// PinnedMemoryLimit caps their pinned device memory in bytes; 0: none.
	PinnedMemoryLimit int64
}

// MPSDaemon is a running daemon.
type MPSDaemon struct {
	ID string
	// PipeDir is the host directory of the daemon's pipes, its control
	// pipe among them.
	PipeDir string
	// Namespaces is true where the daemon runs MPS v3: each share gets a
	// namespace of its own (Sharer.EnsureMPSNamespace), and containers
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

// Sharer applies sharing settings. Every backend implements it (it is part
// of Backend); a GPU that cannot do a thing returns an error wrapping
// ErrSharingNotSupported.
type Sharer interface {
	// SetTimeSlice sets the compute time-slice interval of the GPU with
	// gpuUUID (a whole GPU). TimeSliceDefault restores the default.
	SetTimeSlice(ctx context.Context, gpuUUID string, ts TimeSlice) error

	// StartMPS starts the daemon of spec, or adopts it when one with
	// spec.ID is already running with the same devices, and returns once
	// it accepts clients with spec's defaults applied.
	StartMPS(ctx context.Context, spec MPSDaemonSpec) (*MPSDaemon, error)

	// StopMPS stops the daemon with id and removes its directories; no
	// such daemon is not an error.
	StopMPS(ctx context.Context, id string) error

	// MPSDaemons lists the daemons that exist (running or left dead), so
	// the agent can stop those no claim holds and restart those a prepared
	// claim needs.
	MPSDaemons(ctx context.Context) ([]MPSDaemonState, error)

	// EnsureMPSNamespace creates (or keeps) namespace ns in the running
	// daemon daemonID, which must run MPS v3 (MPSDaemon.Namespaces), and
	// returns the host directory of its socket.
	EnsureMPSNamespace(ctx context.Context, daemonID string, ns MPSNamespaceSpec) (string, error)

	// DeleteMPSNamespace deletes namespace name of daemon daemonID; no
	// such daemon or namespace is not an error.
	DeleteMPSNamespace(ctx context.Context, daemonID, name string) error
}

// MPSDaemonState is a daemon the backend knows of.
type MPSDaemonState struct {
	ID      string
	Running bool
}
