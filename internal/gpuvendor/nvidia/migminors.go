package nvidia

import "fmt"

// NVIDIA's MIG capability device minors, as the driver lays them out in
// /proc/driver/nvidia-caps/mig-minors:
//
//	config 1, monitor 2, then per GPU (by its /dev/nvidia<minor>) and per
//	GPU instance gi in 0..14:
//	  gpu<g>/gi<gi>/access          3 + g*135 + gi*9
//	  gpu<g>/gi<gi>/ci<ci>/access   that + 1 + ci, ci in 0..7
//
// 9 minors per GPU instance (its own access node and 8 compute instances),
// 15 GPU instances, so 135 minors per GPU (MIG user guide, "Device Nodes
// and Capabilities": gpu31/gi14/ci7/access is 4322). A process needs both
// access nodes (plus the parent's /dev/nvidia<g>) to open a MIG compute
// instance.
const (
	MIGConfigMinor  = 1
	MIGMonitorMinor = 2
	// MaxGPUInstances is the number of GPU instance IDs per GPU
	// (gi0..gi14).
	MaxGPUInstances = 15

	migFirstMinor      = 3
	migMinorsPerGPU    = 135
	migMinorsPerGI     = 9
	maxComputeInstance = 7
)

// MIGCapMinors returns the access-node minors of MIG GPU instance gi on the
// GPU with minor gpuMinor, and of its compute instance ci.
func MIGCapMinors(gpuMinor, gi, ci int) (giMinor, ciMinor int, err error) {
	if gi < 0 || gi >= MaxGPUInstances {
		return 0, 0, fmt.Errorf("MIG GPU instance ID %d outside 0..%d", gi, MaxGPUInstances-1)
	}
	if ci < 0 || ci > maxComputeInstance {
		return 0, 0, fmt.Errorf("MIG compute instance ID %d outside 0..%d", ci, maxComputeInstance)
	}
	giMinor = migFirstMinor + gpuMinor*migMinorsPerGPU + gi*migMinorsPerGI
	return giMinor, giMinor + 1 + ci, nil
}
