package claims

import (
	"context"
	"slices"
	"sort"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/tessera-gpu/tessera/internal/checkpoint"
	"github.com/tessera-gpu/tessera/internal/sharing"
)

// Sharing settings (time-slice interval, MPS) are resolved from the
// allocation's configs into each device's Sharing, which is saved with
// PrepareStarted; the effects that apply them are effect_interval.go and
// effect_mps.go.

// resolveSharing fills each device's Sharing from the claim's configs, and
// NCCLTopoFile: whether the claim's CDI spec mounts an NCCL topology file
// of its GPUs. That file is no side effect: the CDI writer writes it
// before the spec and removes it after (internal/cdi claimfile.go), so a claim
// asking for it is still plain, and it is recorded on each device
// (checkpoint.Device.NCCLTopoFile) for a spec rewritten from the
// checkpoint.
func (m *Manager) resolveSharing(claim *resourceapi.ResourceClaim, devs []planned) error {
	in := make([]sharing.Device, len(devs))
	for i, d := range devs {
		sd := sharing.Device{Request: d.dev.Request, Name: d.dev.Device, Vendor: d.dev.GPU.Vendor, MemoryBytes: d.dev.GPU.MemoryBytes, ComputeUnits: d.dev.GPU.ComputeUnits, Share: d.share}
		switch {
		case d.carve != nil:
			sd.Partition = true
			sd.MemoryBytes = profileMemory(d)
		case d.dev.Partition != nil:
			sd.Partition = true
			sd.MemoryBytes, sd.ComputeUnits = d.dev.Partition.MemoryBytes, d.dev.Partition.ComputeUnits
		}
		in[i] = sd
	}
	out, err := sharing.Resolve(m.cfg.DriverName, claim.Status.Allocation.Devices.Config, in)
	if err != nil {
		return err
	}
	topo, err := sharing.ResolveTopology(m.cfg.DriverName, claim.Status.Allocation.Devices.Config, in)
	if err != nil {
		return err
	}
	for i := range devs {
		devs[i].dev.Sharing = out[i]
		devs[i].dev.NCCLTopoFile = topo[i]
	}
	return nil
}

func profileMemory(d planned) int64 {
	if pt := d.dev.GPU.Partitioning; pt != nil {
		for _, p := range pt.Profiles {
			if p.Name == d.carve.Profile {
				return p.MemoryBytes
			}
		}
	}
	return 0
}

// EnsureSharing is the agent's periodic check that prepared claims' MPS
// daemons are alive: each effect's ensure, under the manager's lock. It
// returns how many daemons had to be started again.
func (m *Manager) EnsureSharing(ctx context.Context) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ensurePrepared(ctx, onWatch)
}

// SharingCounts returns how many prepared claims use each strategy ("" for
// claims without sharing settings) and how many MPS daemons they hold.
func (m *Manager) SharingCounts() (byStrategy map[string]int, daemons int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	byStrategy = map[string]int{}
	shared := map[string]bool{}
	for _, c := range m.cp.Claims {
		if c.State != checkpoint.PrepareCompleted {
			continue
		}
		var strategies []string
		for _, d := range c.Devices {
			s := ""
			if d.Sharing != nil {
				s = string(d.Sharing.Strategy)
			}
			if !slices.Contains(strategies, s) {
				strategies = append(strategies, s)
			}
		}
		for _, s := range strategies {
			byStrategy[s]++
		}
		if slices.ContainsFunc(c.Devices, func(d checkpoint.Device) bool { return d.Sharing.ClaimDaemon() }) {
			daemons++
		}
		for _, id := range sharedDaemonIDs(c) {
			shared[id] = true
		}
	}
	return byStrategy, daemons + len(shared)
}

func sortedClaims(cp *checkpoint.Checkpoint) []*checkpoint.Claim {
	out := make([]*checkpoint.Claim, 0, len(cp.Claims))
	for _, c := range cp.Claims {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out
}
