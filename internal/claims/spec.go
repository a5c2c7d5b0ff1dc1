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
	// assessed once, here: the memory limit's hooks follow it, and the
	// prepare's result carries it to the claim's status (Device.Isolation).
	isolation []isolation.Assessment
}

// writeSpec writes the claim's CDI spec for devs (resolved against the
// node's inventory as published now) and returns the IDs per device and
// how each device is isolated.
func (m *Manager) writeSpec(ref cdi.ClaimRef, devs []cdi.ClaimDevice) ([][]string, []isolation.Assessment, error) {
	s := &claimSpec{ClaimSpec: cdi.ClaimSpec{Claim: ref, Devices: slices.Clone(devs)}}
	s.isolation = make([]isolation.Assessment, len(devs))
	for i := range s.Devices {
		s.Devices[i].Edits = cdi.Edits{}
		if m.cfg.Isolation != nil {
			s.isolation[i] = m.cfg.Isolation(&devs[i].GPU, devs[i].Partition)
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
