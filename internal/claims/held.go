package claims

import (
	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/publish"
)

// ClaimRef names a claim by namespace and name, as the kubelet's
// PodResources API does.
type ClaimRef struct{ Namespace, Name string }

// HeldDevice is what the checkpoint knows of one device of a prepared
// claim: its UUIDs (a partition carved at prepare has its UUID only here)
// and its share of a multi-allocatable device.
type HeldDevice struct {
	Device                 string
	GPUUUID, PartitionUUID string
	Profile                string
	ShareID                string
}

// HeldDevices returns the devices of every prepared claim
// (PrepareCompleted), by claim: the metrics' join of PodResources with the
// checkpoint.
func (m *Manager) HeldDevices() map[ClaimRef][]HeldDevice {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[ClaimRef][]HeldDevice{}
	for _, c := range m.cp.Claims {
		if c.State != checkpoint.PrepareCompleted {
			continue
		}
		ref := ClaimRef{c.Namespace, c.Name}
		for _, d := range c.Devices {
			if !holding(d) {
				continue // a monitor's: its pod uses no GPU
			}
			out[ref] = append(out[ref], HeldDevice{Device: d.Device, GPUUUID: d.GPUUUID, PartitionUUID: d.PartitionUUID, Profile: d.Profile, ShareID: d.ShareID})
		}
	}
	return out
}

// HoldsWhole reports whether a claim the checkpoint records (preparing or
// prepared) holds the GPU with UUID gpu whole: its allocation takes every
// counter of a dynamic GPU, so no placement of it can be allocated.
func (m *Manager) HoldsWhole(gpu string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.cp.Claims {
		for _, d := range c.Devices {
			if holding(d) && d.GPUUUID == gpu && d.PartitionUUID == "" && d.Placement == nil && d.ShareID == "" {
				return true
			}
		}
	}
	return false
}

// Passed returns the GPUs claims record as passed through to virtual
// machines and not known to be back on their drivers (being passed, passed,
// or being given back): publish.Options.Passed, so that none of their
// devices is published meanwhile and each keeps its name.
func (m *Manager) Passed() []publish.PassedGPU {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []publish.PassedGPU
	for _, c := range sortedClaims(m.cp) {
		for _, d := range c.Devices {
			v := d.VFIO
			if v == nil || len(v.Functions) == 0 || (c.State == checkpoint.PrepareCompleted && !v.Bound) {
				continue
			}
			out = append(out, publish.PassedGPU{UUID: d.GPUUUID, PCIBusID: v.Functions[0].Address})
		}
	}
	return out
}

// Recorded returns every claim the checkpoint records (in any state), by
// UID, with its namespace and name: what the driver's start-up sweep of
// device metadata keeps.
func (m *Manager) Recorded() map[string]ClaimRef {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]ClaimRef, len(m.cp.Claims))
	for uid, c := range m.cp.Claims {
		out[uid] = ClaimRef{c.Namespace, c.Name}
	}
	return out
}

// PassthroughChanges counts the GPUs passed through or given back since
// the manager started, without the state lock: the driver republishes when
// it moved (Passed says what to).
func (m *Manager) PassthroughChanges() uint64 { return m.passChanges.Load() }
