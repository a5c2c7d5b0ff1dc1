package sim

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/fsutil"
	"github.com/tessera-gpu/tessera/internal/gpuvendor/vendors"
	"github.com/tessera-gpu/tessera/internal/inventory"
)

// Partition state (and time-slice intervals, sharing.go) lives in
// stateDir/state.json with the boot id it was written under. Like MIG
// instances on real hardware, partitions outlive the process (a driver
// restart) but not a reboot: a file from another boot, or for another
// machine, is ignored and the machine file's partitions return.

const (
	stateFileName = "state.json"
	stateVersion  = 1
)

type stateDoc struct {
	Version  int        `json:"version"`
	BootID   string     `json:"bootID"`
	Machine  string     `json:"machine"`
	NodeName string     `json:"nodeName"`
	Serial   uint64     `json:"serial"`
	GPUs     []GPUState `json:"gpus"`
}

// GPUState is one GPU as the state file records it; ReadState and
// EditState give it to tools and tests outside the agent.
type GPUState struct {
	UUID string `json:"uuid"`
	// PCIBusID names the GPU for tools that name GPUs as the slices do
	// (tessera-sim inject --device=gpu-3); informational, not replayed.
	PCIBusID string `json:"pciBusID,omitempty"`
	// PartitioningEnabled is the GPU's partition (MIG) mode; absent in
	// files from before SetPartitionMode, meaning the machine file's.
	PartitioningEnabled *bool                 `json:"partitioningEnabled,omitempty"`
	Partitions          []inventory.Partition `json:"partitions"`
	// InUse lists partitions (by UUID) a process outside the driver holds
	// open: destroying them fails, as NVML's does with IN_USE. Only a hand
	// edit while the agent is down sets it (tests, demos); it goes with
	// the partition.
	InUse []string `json:"inUse,omitempty"`
	// TimeSlice is the GPU's compute time-slice interval when not the
	// default (inventory.GPU.TimeSlice); absent in older files. Like the
	// driver's compute policy it lasts until a reboot.
	TimeSlice string `json:"timeSlice,omitempty"`
	// ModeChange is a mode change the driver is still enumerating (a GPU
	// whose partitions are a mode: modes.go); the GPU has no partitions
	// until it is done. Absent in older files.
	ModeChange *ModeChange `json:"modeChange,omitempty"`
}

// loadState returns the GPUs to start with, partition mode and partitions
// restored (nil: the machine file's), and the serial to continue from. It
// never fails: whatever is wrong with the file is logged and the machine
// file's state is used.
func loadState(logger klog.Logger, dir string, m *Machine, bootID string) (gpus []inventory.GPU, serial uint64, inUse map[string]bool, pending map[string]ModeChange) {
	p := filepath.Join(dir, stateFileName)
	var doc stateDoc
	found, err := fsutil.ReadJSON(p, &doc)
	switch {
	case errors.Is(err, fsutil.ErrCorrupt):
		logger.Error(err, "Partition state is corrupt, starting from the machine file", "path", p)
		return nil, 0, nil, nil
	case err != nil:
		logger.Error(err, "Reading partition state, starting from the machine file", "path", p)
		return nil, 0, nil, nil
	case !found:
		logger.V(2).Info("No partition state yet, starting from the machine file", "path", p)
		return nil, 0, nil, nil
	}
	switch {
	case doc.Version != stateVersion:
		logger.Info("Partition state has another version, starting from the machine file", "path", p, "version", doc.Version)
		return nil, 0, nil, nil
	case doc.BootID != bootID:
		logger.Info("Host rebooted since the partition state was written, starting from the machine file", "path", p)
		return nil, 0, nil, nil
	case doc.Machine != m.Name || doc.NodeName != m.NodeName:
		logger.Info("Partition state belongs to another machine, starting from the machine file", "path", p, "stateMachine", doc.Machine, "stateNode", doc.NodeName)
		return nil, 0, nil, nil
	}
	gpus, err = replayState(m, &doc)
	if err != nil {
		logger.Error(err, "Partition state does not fit the machine, starting from the machine file", "path", p)
		return nil, 0, nil, nil
	}
	inUse, pending = map[string]bool{}, map[string]ModeChange{}
	for _, sg := range doc.GPUs {
		for _, u := range sg.InUse {
			inUse[u] = true
		}
		if sg.ModeChange != nil {
			pending[sg.UUID] = *sg.ModeChange
		}
	}
	logger.V(2).Info("Restored partition state", "path", p)
	return gpus, doc.Serial, inUse, pending
}

// replayState checks the stored partitions against the machine with the
// same rules CreatePartition applies, so a hand-edited or stale file cannot
// produce a state the hardware could not be in.
func replayState(m *Machine, doc *stateDoc) ([]inventory.GPU, error) {
	if len(doc.GPUs) != len(m.Node.GPUs) {
		return nil, fmt.Errorf("state has %d GPUs, machine has %d", len(doc.GPUs), len(m.Node.GPUs))
	}
	out := make([]inventory.GPU, len(doc.GPUs))
	uuids := map[string]bool{}
	for i, sg := range doc.GPUs {
		g := m.Node.GPUs[i].Clone()
		if sg.UUID != g.UUID {
			return nil, fmt.Errorf("GPU %d is %s in the state, %s in the machine", i, sg.UUID, g.UUID)
		}
		if sg.PartitioningEnabled != nil {
			if g.Partitioning == nil {
				return nil, fmt.Errorf("GPU %s: state sets a partition mode on a GPU that cannot be partitioned", g.UUID)
			}
			g.Partitioning.Enabled = *sg.PartitioningEnabled
		}
		if sg.TimeSlice != "" {
			ts, err := parseTimeSlice(sg.TimeSlice)
			if err != nil || ts != backend.TimeSliceDefault && !vendors.Capabilities(g.Vendor).TimeSliceIntervals {
				return nil, fmt.Errorf("GPU %s: time-slice interval %q cannot be set on it", g.UUID, sg.TimeSlice)
			}
			if ts != backend.TimeSliceDefault { // the default is kept as no value
				g.TimeSlice = sg.TimeSlice
			}
		}
		g.Partitions = nil
		for _, sp := range sg.Partitions {
			p, err := planPartition(&g, sp.Profile, sp.Placement)
			if err != nil {
				return nil, err
			}
			if sp.UUID == "" || uuids[sp.UUID] {
				return nil, fmt.Errorf("GPU %s: partition UUID %q is empty or not unique", g.UUID, sp.UUID)
			}
			if slices.ContainsFunc(g.Partitions, func(q inventory.Partition) bool { return q.GPUInstanceID == sp.GPUInstanceID }) {
				return nil, fmt.Errorf("GPU %s: GPU instance id %d is used twice", g.UUID, sp.GPUInstanceID)
			}
			uuids[sp.UUID] = true
			p.UUID, p.GPUInstanceID, p.ComputeInstanceID = sp.UUID, sp.GPUInstanceID, sp.ComputeInstanceID
			p.Minor, p.RenderMinor, p.MemoryPartitionMode = sp.Minor, sp.RenderMinor, sp.MemoryPartitionMode
			g.Partitions = append(g.Partitions, p)
		}
		sortPartitions(g.Partitions)
		if err := replayMode(&g, sg.ModeChange); err != nil {
			return nil, err
		}
		out[i] = g
	}
	return out, nil
}

// replayMode sets the mode of a GPU whose partitions are a mode: the one a
// change in progress sets (no partitions yet), else its partitions', else
// the whole mode.
func replayMode(g *inventory.GPU, c *ModeChange) error {
	pt := g.Partitioning
	if pt == nil || !vendors.Capabilities(g.Vendor).PartitionModes {
		if c != nil {
			return fmt.Errorf("GPU %s: state has a mode change on a GPU without partition modes", g.UUID)
		}
		return nil
	}
	switch {
	case c != nil && (pt.Profile(c.Mode) == nil || len(g.Partitions) > 0):
		return fmt.Errorf("GPU %s: state has a change to mode %q with partitions %d, or a mode it cannot be set to", g.UUID, c.Mode, len(g.Partitions))
	case c != nil:
		pt.Mode = c.Mode
	case len(g.Partitions) > 0:
		pt.Mode = g.Partitions[0].Profile
	case !pt.Enabled && wholeMode(pt) != nil:
		pt.Mode = wholeMode(pt).Name
	default:
		pt.Mode = ""
	}
	return nil
}

// saveState writes the state atomically, so a crash leaves either the old
// or the new state, never a torn one.
func saveState(dir string, doc *stateDoc) error {
	if err := fsutil.WriteJSON(filepath.Join(dir, stateFileName), doc, true, 0o644); err != nil {
		return fmt.Errorf("saving partition state: %w", err)
	}
	return nil
}

// StateGPUs returns the GPUs recorded in the state directory, with only
// their UUID and PCI bus ID, for tools that name them as the slices do. A
// directory no agent has run on, or one from before bus IDs were recorded,
// is an error saying so.
func StateGPUs(dir string) ([]inventory.GPU, error) {
	gpus, err := ReadState(dir)
	if err != nil {
		return nil, err
	}
	out := make([]inventory.GPU, 0, len(gpus))
	for _, g := range gpus {
		if g.PCIBusID == "" {
			return nil, fmt.Errorf("simulator state in %s has no PCI bus IDs (written by an older agent; restart it once)", dir)
		}
		out = append(out, inventory.GPU{UUID: g.UUID, PCIBusID: g.PCIBusID})
	}
	return out, nil
}

// ReadState returns the GPUs recorded in the state directory as the agent
// last saved them (read-only; the agent may be running).
func ReadState(dir string) ([]GPUState, error) {
	doc, err := readStateDoc(dir)
	if err != nil {
		return nil, err
	}
	return doc.GPUs, nil
}

// EditState changes the recorded state of the GPU with uuid, as something
// outside the driver would change the hardware (nvidia-smi cutting a MIG
// partition, a process holding one open). No agent may run on dir: it
// would overwrite the file.
func EditState(dir, uuid string, edit func(*GPUState)) error {
	doc, err := readStateDoc(dir)
	if err != nil {
		return err
	}
	for i := range doc.GPUs {
		if doc.GPUs[i].UUID == uuid {
			edit(&doc.GPUs[i])
			return saveState(dir, doc)
		}
	}
	return fmt.Errorf("simulator state in %s has no GPU %s", dir, uuid)
}

func readStateDoc(dir string) (*stateDoc, error) {
	p := filepath.Join(dir, stateFileName)
	var doc stateDoc
	found, err := fsutil.ReadJSON(p, &doc)
	if err != nil {
		return nil, fmt.Errorf("simulator state: %w", err)
	}
	if !found {
		return nil, fmt.Errorf("read simulator state (has an agent run with --sim-state-dir=%s?): %s does not exist", dir, p)
	}
	return &doc, nil
}
