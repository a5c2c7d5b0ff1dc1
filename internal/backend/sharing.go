package backend

import (
	"context"
	"errors"
	"fmt"

	"github.com/tessera-gpu/tessera/internal/mps"
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
	StartMPS(ctx context.Context, spec mps.DaemonSpec) (*mps.Daemon, error)

	// StopMPS stops the daemon with id and removes its directories; no
	// such daemon is not an error.
	StopMPS(ctx context.Context, id string) error

	// MPSDaemons lists the daemons that exist (running or left dead), so
	// the agent can stop those no claim holds and restart those a prepared
	// claim needs.
	MPSDaemons(ctx context.Context) ([]mps.DaemonState, error)

	// EnsureMPSNamespace creates (or keeps) namespace ns in the running
	// daemon daemonID, which must run MPS v3 (mps.Daemon.Namespaces), and
	// returns the host directory of its socket.
	EnsureMPSNamespace(ctx context.Context, daemonID string, ns mps.NamespaceSpec) (string, error)

	// DeleteMPSNamespace deletes namespace name of daemon daemonID; no
	// such daemon or namespace is not an error.
	DeleteMPSNamespace(ctx context.Context, daemonID, name string) error
}
