package claims

import (
	"errors"
	"fmt"

	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/tessera-gpu/tessera/internal/cdi"
	"github.com/tessera-gpu/tessera/internal/gpuvendor/vendors"
	"github.com/tessera-gpu/tessera/internal/inventory"
	"github.com/tessera-gpu/tessera/internal/nccltopo"
)

// A claim that asked for an NCCL topology file (docs/training.md) gets, in
// its spec, one more claim-level device every one of its devices' IDs
// names: the file mounted read-only at nccltopo.ContainerPath,
// NCCL_TOPO_FILE naming it, and the GPUs in the file's rank order in the
// vendor's visible-devices variable (gpuvendor.Vendor.OrderedDevicesEnv).
// The file is built from the node's inventory as published now, which the
// devices were resolved against; cdi keeps it beside the spec (its
// claimfile.go).

// ncclTopoMountOptions: the container reads the file and nothing more.
var ncclTopoMountOptions = []string{"ro", "nosuid", "nodev", "noexec", "rbind"}

// ncclTopology adds the claim's topology file and its claim-level device
// to s when its devices asked for one. The claims package resolved the
// request (sharing.ResolveTopology); this refuses what that would have
// refused, so a recorded device list cannot get a file describing other
// GPUs.
func (m *Manager) ncclTopology(s *claimSpec) error {
	if !wantsFile(s.Devices) {
		return nil
	}
	node := m.cfg.Devices().Node
	if node == nil {
		return errors.New("NCCL topology file: no node inventory to write it from")
	}
	idx := make([]int, 0, len(s.Devices))
	for _, d := range s.Devices {
		if !d.NCCLTopoFile || d.Partition != nil || d.Sharing.IsShare() {
			return fmt.Errorf("NCCL topology file: device %s/%s is not a whole GPU that asked for it", d.Pool, d.Device)
		}
		i := gpuIndex(node, d.GPU.UUID)
		if i < 0 {
			return fmt.Errorf("NCCL topology file: GPU %s of device %s/%s is not in the node's inventory", d.GPU.UUID, d.Pool, d.Device)
		}
		idx = append(idx, i)
	}
	f, err := nccltopo.Build(node, idx, nccltopo.Options{})
	if err != nil {
		return fmt.Errorf("NCCL topology file: %w", err)
	}
	s.File = f.XML
	s.Shared = append(s.Shared, ncclDevice(f, node, m.cfg.CDI.TopologyPath(s.Claim.UID)))
	return nil
}

// ncclDevice is the claim-level device of topology file f, at hostPath:
// in a claim of several requests, each request's lists only its GPUs,
// still in the file's rank order.
func ncclDevice(f *nccltopo.File, node *inventory.Node, hostPath string) cdi.ClaimLevel {
	return cdi.ClaimLevel{
		Name:  "nccl",
		Joins: func(d *cdi.ClaimDevice) bool { return d.NCCLTopoFile },
		Edits: func(devs []cdi.ClaimDevice) (cdi.Edits, error) {
			in := map[string]bool{}
			for _, d := range devs {
				in[d.GPU.UUID] = true
			}
			var gpus []*inventory.GPU
			for _, i := range f.Order {
				if in[node.GPUs[i].UUID] {
					gpus = append(gpus, &node.GPUs[i])
				}
			}
			v, ok := vendors.For(f.Vendor)
			if !ok {
				return cdi.Edits{}, fmt.Errorf("NCCL topology file: no rules for vendor %q", f.Vendor)
			}
			visible, err := v.OrderedDevicesEnv(gpus)
			if err != nil {
				return cdi.Edits{}, fmt.Errorf("NCCL topology file: %w", err)
			}
			return cdi.Edits{
				Env:    []string{nccltopo.FileEnv + "=" + nccltopo.ContainerPath, visible},
				Mounts: []*cdispec.Mount{{HostPath: hostPath, ContainerPath: nccltopo.ContainerPath, Options: ncclTopoMountOptions}},
			}, nil
		},
	}
}

func wantsFile(devs []cdi.ClaimDevice) bool {
	for i := range devs {
		if devs[i].NCCLTopoFile {
			return true
		}
	}
	return false
}

func gpuIndex(n *inventory.Node, uuid string) int {
	for i := range n.GPUs {
		if n.GPUs[i].UUID == uuid {
			return i
		}
	}
	return -1
}
