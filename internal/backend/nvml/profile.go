package nvml

import "fmt"

// migMemoryGB is the memory size in a MIG profile's name as nvidia-smi
// prints it. The name is not the instance's memory rounded: NVIDIA names a
// profile by its share of the GPU in eighths (the GPU's 8 memory slices),
// rounded up, times the GPU's memory in whole GB, rounded up, and the
// product rounded to the nearest GB. So a 9984 MiB instance of an 81559 MiB
// H100 is 1/8 of 80 = "10gb", and a 1-slice instance on a 141 GB H200 is
// "18gb" while its 2-slice-memory sibling is "35gb" (0.25 x 141 = 35.25).
// Checked against the names in the MIG user guide's profile tables and the
// sim catalogue (dgx-h100, dgx-a100, hgx-h200). Integer arithmetic keeps
// exact eighths exact.
func migMemoryGB(instanceMiB, totalBytes uint64) uint64 {
	if totalBytes == 0 {
		return 0
	}
	const mib, gib = 1 << 20, 1 << 30
	inst := instanceMiB * mib
	eighths := (inst*8 + totalBytes - 1) / totalBytes // ceil(share * 8)
	totalGB := (totalBytes + gib - 1) / gib           // ceil(total in GB)
	return (eighths*totalGB*2 + 8) / 16               // round(eighths/8 * totalGB)
}

// migProfileSuffix is the name suffix of NVML's profile variants, as
// nvidia-smi mig -lgip prints them: REV1 adds the media extensions (+me),
// the GFX variants graphics (+gfx), NO_ME drops media engines (-me), ALL_ME
// takes all of them (+me.all). REV2 (1g.20gb on H100) needs none: its
// memory size already tells it apart.
func migProfileSuffix(profileID int) string {
	switch profileID {
	case 7, 8: // GPU_INSTANCE_PROFILE_1_SLICE_REV1, _2_SLICE_REV1
		return "+me"
	case 10, 11, 12, 17: // _1_SLICE_GFX, _2_SLICE_GFX, _4_SLICE_GFX, _3_SLICE_GFX
		return "+gfx"
	case 13, 14: // _1_SLICE_NO_ME, _2_SLICE_NO_ME
		return "-me"
	case 15, 16: // _1_SLICE_ALL_ME, _2_SLICE_ALL_ME
		return "+me.all"
	}
	return ""
}

// migProfileName is a GPU instance profile's name: "<slices>g.<GB>gb<suffix>".
func migProfileName(profileID int, sliceCount uint32, memoryMiB, gpuTotalBytes uint64) string {
	return fmt.Sprintf("%dg.%dgb%s", sliceCount, migMemoryGB(memoryMiB, gpuTotalBytes), migProfileSuffix(profileID))
}

// migDeviceProfileName names a compute instance: the GPU instance's name,
// prefixed with "<n>c." when the compute instance takes fewer compute
// slices than its GPU instance (nvidia-smi's "1c.3g.40gb").
func migDeviceProfileName(giName string, giSlices, ciSlices uint32) string {
	if ciSlices == 0 || ciSlices >= giSlices {
		return giName
	}
	return fmt.Sprintf("%dc.%s", ciSlices, giName)
}
