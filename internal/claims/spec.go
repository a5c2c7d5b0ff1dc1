package claims

import (
	"fmt"
	"slices"

	"github.com/tessera-gpu/tessera/internal/cdi"
	"github.com/tessera-gpu/tessera/internal/isolation"
)

// A claim's CDI spec is assembled from what its owners return (cdi's
// edits.go): each effect adds its edits (effect.edits: an MPS daemon's
// claim-level device, a memory limit's hooks), the NCCL topology file its
// claim-level device and the file (nccl.go), and cdi adds each vendor's
// nodes and environment, names, records, validates and writes.

// claimSpec is a claim's spec while its owners fill it in.
type claimSpec struct {
	cdi.ClaimSpec
	// isolation is how each device's share would be held (Config.Isolation),
	// assessed once, here, for a share or a device with a memory limit
	// (the zero Assessment, held by nothing, for the others): the memory
	// limit's hooks follow it, and the prepare's result carries it to the
	// claim's status (Device.Isolation).
	isolation []isolation.Assessment
}

// writeSpec writes the claim's CDI spec for devs (resolved against the
// node's inventory as published now) and returns the IDs per device and
// how each device is isolated.
func (m *Manager) writeSpec(ref cdi.ClaimRef, devs []cdi.ClaimDevice) ([][]string, []isolation.Assessment, error) {
	s := &claimSpec{ClaimSpec: cdi.ClaimSpec{Claim: ref, Devices: slices.Clone(devs)}}
	s.isolation = make([]isolation.Assessment, len(devs))
	for i := range s.Devices {
		d := &s.Devices[i]
		d.Edits = cdi.Edits{}
		// Only a share's or a limited device's isolation is read (the
		// hooks, the share's status): the others' is not assessed.
		if m.cfg.Isolation != nil && (d.Sharing.IsShare() || limitBytes(d) > 0) {
			s.isolation[i] = m.cfg.Isolation(&d.GPU, d.Partition)
		}
	}
	for _, e := range effects {
		if err := e.edits(m, s); err != nil {
			return nil, nil, fmt.Errorf("CDI spec for claim %s: %w", ref, err)
		}
	}
	if err := m.ncclTopology(s); err != nil {
		return nil, nil, fmt.Errorf("CDI spec for claim %s: %w", ref, err)
	}
	ids, err := m.cfg.CDI.WriteClaim(s.ClaimSpec)
	return ids, s.isolation, err
}
