package standin

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tessera-gpu/tessera/pkg/fsutil"
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
