package cdi

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tessera-gpu/tessera/pkg/inventory"
)

// NVIDIA's MIG capability device minors, as the driver lays them out in
// /proc/driver/nvidia-caps/mig-minors:
//
//	config 1, monitor 2, then per GPU (by its /dev/nvidia<minor>) and per
//	GPU instance gi in 0..14:
//	  gpu<g>/gi<gi>/access          3 + g*135 + gi*9
//	  gpu<g>/gi<gi>/ci<ci>/access   that + 1 + ci, ci in 0..7
//
// 9 minors per GPU instance (its own access node and 8 compute instances),
// 15 GPU instances, so 135 minors per GPU. A process needs both access nodes
// (plus the parent's /dev/nvidia<g>) to open a MIG compute instance.
const (
	migFirstMinor     = 3
	migMinorsPerGPU   = 135
	migMinorsPerGI    = 9
	migMaxGPUInstance = 14
	migMaxCompute     = 7
)

// migCapMinors returns the access-node minors of a MIG GPU instance and of
// its compute instance.
func migCapMinors(gpuMinor, gi, ci int) (giMinor, ciMinor int, err error) {
	if gi < 0 || gi > migMaxGPUInstance {
		return 0, 0, fmt.Errorf("MIG GPU instance ID %d outside 0..%d", gi, migMaxGPUInstance)
	}
	if ci < 0 || ci > migMaxCompute {
		return 0, 0, fmt.Errorf("MIG compute instance ID %d outside 0..%d", ci, migMaxCompute)
	}
	giMinor = migFirstMinor + gpuMinor*migMinorsPerGPU + gi*migMinorsPerGI
	return giMinor, giMinor + 1 + ci, nil
}

var nvidiaRules = vendorRules{
	deviceNodes: nvidiaDeviceNodes,
	// Control, unified memory and its tools node: needed once by any CUDA
	// process, whatever GPUs it sees.
	commonNodes: []string{"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"},
	commonEnv:   nvidiaEnv,
}

func nvidiaDeviceNodes(d ClaimDevice) ([]string, error) {
	if err := checkMinor("GPU minor", d.GPU.Minor); err != nil {
		return nil, err
	}
	gpuNode := "nvidia" + strconv.Itoa(d.GPU.Minor)
	p := d.Partition
	if p == nil {
		return []string{gpuNode}, nil
	}
	if p.Kind != inventory.PartitionMIG {
		return nil, fmt.Errorf("NVIDIA partition %s has kind %q, want %q", p.UUID, p.Kind, inventory.PartitionMIG)
	}
	giMinor, ciMinor, err := migCapMinors(d.GPU.Minor, p.GPUInstanceID, p.ComputeInstanceID)
	if err != nil {
		return nil, fmt.Errorf("NVIDIA partition %s: %w", p.UUID, err)
	}
	return []string{
		gpuNode,
		"nvidia-caps/nvidia-cap" + strconv.Itoa(giMinor),
		"nvidia-caps/nvidia-cap" + strconv.Itoa(ciMinor),
	}, nil
}

// nvidiaEnv names the claim's NVIDIA devices for the NVIDIA container
// stack and CUDA: whole GPUs by GPU UUID, MIG instances by MIG UUID.
func nvidiaEnv(devs []ClaimDevice) ([]string, error) {
	seen := map[string]bool{}
	var uuids []string
	for _, d := range devs {
		uuid := d.GPU.UUID
		if d.Partition != nil {
			uuid = d.Partition.UUID
		}
		if uuid == "" {
			return nil, fmt.Errorf("NVIDIA device %s/%s has no UUID", d.Pool, d.Device)
		}
		if !seen[uuid] {
			seen[uuid] = true
			uuids = append(uuids, uuid)
		}
	}
	return []string{"NVIDIA_VISIBLE_DEVICES=" + strings.Join(uuids, ",")}, nil
}
