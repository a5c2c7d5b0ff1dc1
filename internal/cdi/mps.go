package cdi

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/tessera-gpu/tessera/internal/inventory"
)

// MPSContainerPipeDir is where a container sees its claim's MPS pipe
// directory: MPS's own default, so a client that ignores the environment
// still finds the daemon.
const MPSContainerPipeDir = "/tmp/nvidia-mps"

// mpsPipeMountOptions: the tenant writes its sockets in the pipe
// directory, and so could drop a program or a device node there; neither
// may run or open from it, in the tenant's container or anywhere else the
// directory is mounted (the daemon pod's command is pinned besides).
var mpsPipeMountOptions = []string{"rbind", "rw", "nosuid", "nodev", "noexec"}

// mpsDevice returns the CDI device every container using one of the claim's
// MPS devices gets: the daemon's pipe directory mounted, and the CUDA_MPS_*
// environment that makes CUDA connect to it with the claim's limits. nil
// when no device is under MPS. CUDA_VISIBLE_DEVICES lists the devices in
// claim order, so the ordinals of CUDA_MPS_PINNED_DEVICE_MEM_LIMIT are the
// ones a client sees. scope is the suffix of the request devs are (scope.go),
// "" for the claim's.
func mpsDevice(claimUID, scope string, devs []ClaimDevice) (*cdispec.Device, error) {
	var (
		pipe    string
		uuids   []string
		limits  []string
		threads int32
	)
	for _, d := range devs {
		if !d.Sharing.IsMPS() {
			continue
		}
		if d.MPSPipeDir == "" || !filepath.IsAbs(d.MPSPipeDir) {
			return nil, fmt.Errorf("device %s/%s: MPS pipe directory %q is not an absolute path", d.Pool, d.Device, d.MPSPipeDir)
		}
		if pipe != "" && pipe != d.MPSPipeDir {
			return nil, errors.New("the claim's MPS devices name different pipe directories")
		}
		pipe = d.MPSPipeDir
		uuid := d.GPU.UUID
		if d.Partition != nil {
			uuid = d.Partition.UUID
		}
		if d.Sharing.MPSPinnedMemoryLimit > 0 {
			// MiB: the unit CUDA's limit syntax takes ("0=4096M").
			limits = append(limits, strconv.Itoa(len(uuids))+"="+strconv.FormatInt(d.Sharing.MPSPinnedMemoryLimit>>20, 10)+"M")
		}
		uuids = append(uuids, uuid)
		threads = d.Sharing.MPSActiveThreadPercentage
	}
	if pipe == "" {
		return nil, nil
	}
	env := []string{
		"CUDA_MPS_PIPE_DIRECTORY=" + MPSContainerPipeDir,
		"CUDA_VISIBLE_DEVICES=" + strings.Join(uuids, ","),
	}
	if threads > 0 {
		env = append(env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="+strconv.Itoa(int(threads)))
	}
	if len(limits) > 0 {
		env = append(env, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="+strings.Join(limits, ","))
	}
	return &cdispec.Device{
		Name:        mpsDeviceName(claimUID) + scope,
		Annotations: map[string]string{annVendor: string(inventory.VendorNVIDIA)}, // MPS is NVIDIA's
		ContainerEdits: cdispec.ContainerEdits{
			Env: env,
			Mounts: []*cdispec.Mount{{
				HostPath:      pipe,
				ContainerPath: MPSContainerPipeDir,
				Options:       mpsPipeMountOptions,
			}},
		},
	}, nil
}
