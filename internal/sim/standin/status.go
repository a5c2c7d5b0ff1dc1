package standin

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tessera-gpu/tessera/internal/fsutil"
)

// Files in the pipe directory.
const (
	// ControlFIFO is where clients send requests.
	ControlFIFO = "control"
	// PIDFile holds the daemon's PID, named as the real daemon names it.
	PIDFile = "nvidia-cuda-mps-control.pid"
	// StatusFile is the daemon's state as JSON (Status).
	StatusFile = "status.json"
	// LogFile, in the log directory, lists every command received.
	LogFile = "control.log"
)

// Status is what a stand-in daemon was told, as it keeps it in StatusFile.
type Status struct {
	PID int `json:"pid"`
	// Protocol is 2 (legacy) or 3 (MPS v3: servers and namespaces).
	Protocol int `json:"protocol"`
	// Instance is made at random when the daemon starts, and Started is
	// when: a daemon that kept running keeps both, a new one with the
	// PID of an old one (in a pod, say) does not.
	Instance string    `json:"instance"`
	Started  time.Time `json:"started"`
	// Executable is the program the daemon runs as, as its own mount
	// namespace names it: in a daemon pod of a driver root,
	// /driver-root/usr/bin/nvidia-cuda-mps-control, not the image's
	// /usr/bin/tessera-sim.
	Executable string `json:"executable,omitempty"`
	// Devices is the daemon's CUDA_VISIBLE_DEVICES.
	Devices []string `json:"devices"`
	// DefaultActiveThreadPercentage is 100 until set.
	DefaultActiveThreadPercentage float64 `json:"defaultActiveThreadPercentage"`
	// DefaultPinnedMemLimits maps a device, as the command named it, to
	// its limit as given ("4096M").
	DefaultPinnedMemLimits map[string]string `json:"defaultPinnedMemLimits,omitempty"`
	// Commands are all commands received, in order, failed ones too.
	Commands []string `json:"commands"`
	// Quit is set when the daemon exits on quit (not when killed).
	Quit bool `json:"quit,omitempty"`
	// Servers are a v3 daemon's, by name.
	Servers map[string]ServerStatus `json:"servers,omitempty"`
	// Clients are the connected client sessions, by PID.
	Clients []ClientStatus `json:"clients"`
}

// ServerStatus is a v3 server: its configuration, and its namespaces as
// configured or created (the default namespace, always there, is not
// listed).
type ServerStatus struct {
	// AllowedDevices as configured; empty: all of the daemon's.
	AllowedDevices []string `json:"allowedDevices,omitempty"`
	Limits
	Namespaces map[string]Limits `json:"namespaces"`
}

// ClientStatus is a connected client session.
type ClientStatus struct {
	// PID is the client's, as it sees it (in its own PID namespace).
	PID int `json:"pid"`
	// PIDNamespace is the inode of the client's PID namespace, when it
	// said.
	PIDNamespace string `json:"pidNamespace,omitempty"`
	// Server and Namespace are its socket's; "" on a legacy daemon.
	Server    string    `json:"server"`
	Namespace string    `json:"namespace"`
	Since     time.Time `json:"since"`
}

// ReadStatus reads the status of the daemon of pipeDir. It stays after the
// daemon quits.
func ReadStatus(pipeDir string) (*Status, error) {
	data, err := os.ReadFile(filepath.Join(pipeDir, StatusFile))
	if err != nil {
		return nil, fmt.Errorf("mps stand-in status: %w", err)
	}
	var s Status
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("mps stand-in status %s: %w", filepath.Join(pipeDir, StatusFile), err)
	}
	return &s, nil
}

// writeStatus replaces the status atomically, so a reader never sees half.
func writeStatus(pipeDir string, s *Status) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(filepath.Join(pipeDir, StatusFile), data, 0o644)
}
