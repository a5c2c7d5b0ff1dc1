package nvidia

import (
	"fmt"

	"github.com/google/uuid"
)

// GPU fabric probe states of NVML's nvmlGpuFabricInfo_t.state
// (NVML_GPU_FABRIC_STATE_*, nvml.h "Fabric definitions"); kept here so the
// rule below can be read, and tested, without cgo.
const (
	FabricStateNotSupported uint8 = 0
	FabricStateNotStarted   uint8 = 1
	FabricStateInProgress   uint8 = 2
	FabricStateCompleted    uint8 = 3
)

// FabricInfo is what NVML's GPU fabric info says of one GPU: the probe
// state, the probe's status (an nvmlReturn_t, 0 is success; nvml.h: "must
// be checked only if state returns complete"), the fabric cluster UUID and
// the clique ID.
type FabricInfo struct {
	State       uint8
	Status      uint32
	ClusterUUID uuid.UUID
	CliqueID    uint32
}

// Domain is the GPU's `fabricDomain`, or "" and why it has none. NVIDIA's
// own DRA driver derives its clique the same way (docs/nvml.md, "Fabric
// domain"): only a completed, successful registration counts, and an
// all-zero cluster UUID means NVLink-capable but not in a multi-node
// NVLink domain (what an HGX H100 reports).
func (f FabricInfo) Domain() (domain, why string) {
	switch {
	case f.State == FabricStateNotSupported:
		return "", "fabric not supported"
	case f.State != FabricStateCompleted:
		return "", fmt.Sprintf("fabric registration not complete (state %d)", f.State)
	case f.Status != 0:
		return "", fmt.Sprintf("fabric registration failed (NVML status %d)", f.Status)
	case f.ClusterUUID == uuid.Nil:
		return "", "no multi-node NVLink domain (all-zero cluster UUID)"
	}
	return FabricDomain(f.ClusterUUID, f.CliqueID), ""
}

// FabricDomain formats a fabric domain: "<cluster UUID>.<clique ID>", the
// UUID in its canonical lower-case form, as NVIDIA's DRA driver writes its
// clique ID (38 characters at most, under the attribute limit of 64). An
// all-zero UUID has no domain: "".
func FabricDomain(cluster uuid.UUID, clique uint32) string {
	if cluster == uuid.Nil {
		return ""
	}
	return fmt.Sprintf("%s.%d", cluster, clique)
}
