package mps

import (
	"context"
	"fmt"
)

// A Launcher runs the daemon processes of a Manager. The Manager owns the
// directories, the records and the protocol; the launcher only starts a
// process somewhere, tells whether it still runs, and kills it. The default,
// ProcessLauncher, runs each daemon as a detached child of the agent (host
// processes, systemd installs, the local cluster's fake runtime);
// internal/mps/daemonpod runs each as a pod of the agent's node, so that it
// outlives the agent's container and pod (see docs/sharing.md).
type Launcher interface {
	// Launch starts the daemon l describes, detached from the caller and
	// from ctx's lifetime (ctx bounds only the launch itself), and returns
	// the handle that finds it again.
	Launch(ctx context.Context, l Launch) (Handle, error)
	// Alive reports whether the daemon h names still runs: false once it
	// exited, was killed or deleted, or h now names another process or pod.
	Alive(ctx context.Context, h Handle) bool
	// Kill stops the daemon h names at once, with the MPS servers it
	// spawned, and waits (bounded by the launcher's own limit) until it is
	// gone. A daemon already gone is not an error.
	Kill(ctx context.Context, h Handle) error
	// Find lists the live daemons under root that this launcher runs,
	// found without their records: a crash between launch and record
	// leaves a daemon nobody wrote down. Oldest first: where two run for
	// one id, the Manager keeps the first.
	Find(ctx context.Context, root string) ([]Found, error)
}

// Launch is one daemon to start.
type Launch struct {
	// ID is the daemon's id (Manager.Start's spec.ID).
	ID string
	// Argv is the control program with its arguments, "-f" included.
	Argv []string
	// Env is what the daemon's environment must hold beyond a base the
	// launcher chooses: CUDA_VISIBLE_DEVICES, CUDA_MPS_PIPE_DIRECTORY,
	// CUDA_MPS_LOG_DIRECTORY and EnvDaemonID, by which Find knows it.
	Env map[string]string
	// Dir is the daemon's directory, <root>/<id>, holding pipe/ and log/.
	// The daemon must see it at this same path: the claims' containers
	// mount its pipes from the host path.
	Dir string
	// Output is the file the daemon's stdout and stderr go to, where the
	// launcher can send them there (<Dir>/log/daemon.out).
	Output string
	// Devices are the UUIDs the daemon serves (its CUDA_VISIBLE_DEVICES).
	Devices []string
}

// Handle names a launched daemon, as the Manager records it: a process
// (PID and start time, the PID-reuse guard) or a pod (namespace/name and
// UID, so a pod recreated under the same name is not taken for it).
type Handle struct {
	PID int `json:"pid,omitempty"`
	// StartTime is field 22 of /proc/<PID>/stat.
	StartTime uint64 `json:"startTime,omitempty"`
	// Pod is namespace/name of the daemon's pod.
	Pod    string `json:"pod,omitempty"`
	PodUID string `json:"podUID,omitempty"`
}

// IsZero reports whether h names nothing (a record written before launch).
func (h Handle) IsZero() bool { return h == Handle{} }

// Found is a live daemon a Launcher found without its record.
type Found struct {
	ID      string
	Handle  Handle
	Devices []string
}

// String names the daemon for logs and errors.
func (h Handle) String() string {
	switch {
	case h.Pod != "":
		return "pod " + h.Pod
	case h.PID > 0:
		return fmt.Sprintf("PID %d", h.PID)
	}
	return "not launched"
}
