package sim

import (
	"fmt"
	"maps"
	"path/filepath"

	"github.com/tessera-gpu/tessera/internal/fsutil"
)

// Load: what runs on a simulated device, as its telemetry reports it. It
// lives in the state directory as load.json, written by `tessera-sim load`
// (or SetLoad) and read by every ReadTelemetry, so a test or a demo moves a
// node's numbers without the agent knowing how. A device without a load is
// idle. Unlike partitions, a load does not care about reboots: it is the
// workload's, and the workload is whatever the file says.

// LoadFile is the load file's name in the state directory.
const LoadFile = "load.json"

const loadVersion = 1

// Load is one device's workload.
type Load struct {
	// UtilizationPercent is how busy the device is, 0..100.
	UtilizationPercent float64 `json:"utilizationPercent"`
	// MemoryUsedBytes is the memory it holds; more than the device has
	// reads as all of it.
	MemoryUsedBytes int64 `json:"memoryUsedBytes"`
}

type loadDoc struct {
	Version int             `json:"version"`
	Devices map[string]Load `json:"devices"` // by device UUID
}

// Validate refuses a load no device could have.
func (l Load) Validate() error {
	switch {
	case !(l.UtilizationPercent >= 0 && l.UtilizationPercent <= 100): // NaN fails too
		return fmt.Errorf("utilization %v%% is not within 0..100", l.UtilizationPercent)
	case l.MemoryUsedBytes < 0:
		return fmt.Errorf("memory %d bytes is negative", l.MemoryUsedBytes)
	}
	return nil
}

// ReadLoad returns the loads recorded in stateDir by device UUID; none when
// there is no load file.
func ReadLoad(stateDir string) (map[string]Load, error) {
	p := filepath.Join(stateDir, LoadFile)
	var doc loadDoc
	found, err := fsutil.ReadJSON(p, &doc)
	if err != nil {
		return nil, fmt.Errorf("read simulated load: %w", err)
	}
	if !found {
		return nil, nil
	}
	if doc.Version != loadVersion {
		return nil, fmt.Errorf("simulated load %s has version %d, want %d", p, doc.Version, loadVersion)
	}
	for uuid, l := range doc.Devices {
		if err := l.Validate(); err != nil {
			return nil, fmt.Errorf("simulated load %s, device %s: %w", p, uuid, err)
		}
	}
	return doc.Devices, nil
}

// SetLoad records the load of the device with uuid in stateDir, replacing
// its earlier one. The file is replaced atomically, so a reader sees the
// old or the new loads; two writers at once may lose one's change.
func SetLoad(stateDir, uuid string, l Load) error {
	if err := l.Validate(); err != nil {
		return fmt.Errorf("load of %s: %w", uuid, err)
	}
	return editLoad(stateDir, func(m map[string]Load) { m[uuid] = l })
}

// ClearLoad makes the device with uuid idle again.
func ClearLoad(stateDir, uuid string) error {
	return editLoad(stateDir, func(m map[string]Load) { delete(m, uuid) })
}

func editLoad(stateDir string, edit func(map[string]Load)) error {
	cur, err := ReadLoad(stateDir)
	if err != nil {
		return err
	}
	m := maps.Clone(cur)
	if m == nil {
		m = map[string]Load{}
	}
	edit(m)
	if err := fsutil.WriteJSON(filepath.Join(stateDir, LoadFile), loadDoc{Version: loadVersion, Devices: m}, true, 0o644); err != nil {
		return fmt.Errorf("save simulated load: %w", err)
	}
	return nil
}
