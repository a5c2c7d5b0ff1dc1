//go:build cgo && linux

package nvml

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tessera-gpu/tessera/internal/gpuvendor/nvidia"
)

// fabric reads the GPU's multi-node NVLink domain (fabricDomain) from
// nvmlDeviceGetGpuFabricInfo. That is the call NVIDIA's DRA driver makes
// for its clique ID, and the only fabric-info call go-nvml's mock can
// answer: GetGpuFabricInfoV returns a handler bound to a real device
// handle, and v4 replaces the one clique ID with a per-type clique list.
// The v1 struct carries everything the rule needs (state, status, cluster
// UUID, clique ID); health mask and summary, which v1 lacks, are not used.
//
// A missing domain is never a fault of the GPU: NOT_SUPPORTED (pre-Hopper,
// PCIe cards) and FUNCTION_NOT_FOUND (a driver without the call) are
// answers; any other failure is logged and the attribute left out.
func (r *gpuReader) fabric() {
	info, ret := r.h.GetGpuFabricInfo()
	if err := check("nvmlDeviceGetGpuFabricInfo", ret); err != nil {
		if r.lostOn(err) || notSupported(err) {
			return
		}
		r.b.logger.Info("GPU fabric info unreadable; fabricDomain left out", "uuid", r.g.UUID, "err", err)
		return
	}
	f := nvidia.FabricInfo{State: info.State, Status: info.Status, ClusterUUID: info.ClusterUuid, CliqueID: info.CliqueId}
	domain, why := f.Domain()
	if domain == "" && info.State != nvml.GPU_FABRIC_STATE_NOT_SUPPORTED {
		r.b.logger.V(2).Info("No fabricDomain", "uuid", r.g.UUID, "reason", why)
	}
	r.g.FabricDomain = domain
}
