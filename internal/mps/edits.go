package mps

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// ContainerPipeDir is where a container sees its claim's MPS pipe
// directory: MPS's own default, so a client that ignores the environment
// still finds the daemon.
const ContainerPipeDir = "/tmp/nvidia-mps"

// pipeMountOptions: the tenant writes its sockets in the pipe directory,
// and so could drop a program or a device node there; neither may run or
// open from it, in the tenant's container or anywhere else the directory
// is mounted (the daemon pod's command is pinned besides).
var pipeMountOptions = []string{"rbind", "rw", "nosuid", "nodev", "noexec"}

// Client is one device a container reaches through a claim's MPS daemon.
type Client struct {
	// Name names the device in errors (pool/device).
	Name string
	// PipeDir is the host directory of the daemon's pipes.
	PipeDir string
	// UUID is the GPU's or the partition's.
	UUID string
	// PinnedMemoryLimit is the client's pinned device memory limit in
	// bytes; 0 for none.
	PinnedMemoryLimit int64
	// ActiveThreadPercentage is the clients' compute limit; 0 for none.
	ActiveThreadPercentage int32
}

// ClientEdits are what every container using the clients (one claim's, or
// one of its requests', in claim order) gets: the daemon's pipe directory
// mounted, and the CUDA_MPS_* environment that makes CUDA connect to it
// with the claim's limits. CUDA_VISIBLE_DEVICES lists the devices in claim
// order, so the ordinals of CUDA_MPS_PINNED_DEVICE_MEM_LIMIT are the ones
// a client sees.
func ClientEdits(clients []Client) (env []string, mount *cdispec.Mount, err error) {
	if len(clients) == 0 {
		return nil, nil, errors.New("MPS client edits: no devices")
	}
	var (
		pipe    string
		uuids   []string
		limits  []string
		threads int32
	)
	for _, c := range clients {
		if c.PipeDir == "" || !filepath.IsAbs(c.PipeDir) {
			return nil, nil, fmt.Errorf("device %s: MPS pipe directory %q is not an absolute path", c.Name, c.PipeDir)
		}
		if pipe != "" && pipe != c.PipeDir {
			return nil, nil, errors.New("the claim's MPS devices name different pipe directories")
		}
		pipe = c.PipeDir
		if c.PinnedMemoryLimit > 0 {
			// MiB: the unit CUDA's limit syntax takes ("0=4096M").
			limits = append(limits, strconv.Itoa(len(uuids))+"="+strconv.FormatInt(c.PinnedMemoryLimit>>20, 10)+"M")
		}
		uuids = append(uuids, c.UUID)
		threads = c.ActiveThreadPercentage
	}
	env = []string{
		"CUDA_MPS_PIPE_DIRECTORY=" + ContainerPipeDir,
		"CUDA_VISIBLE_DEVICES=" + strings.Join(uuids, ","),
	}
	if threads > 0 {
		env = append(env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="+strconv.Itoa(int(threads)))
	}
	if len(limits) > 0 {
		env = append(env, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="+strings.Join(limits, ","))
	}
	return env, &cdispec.Mount{HostPath: pipe, ContainerPath: ContainerPipeDir, Options: pipeMountOptions}, nil
}
