package amdsysfs

import "fmt"

// gfxVersion turns KFD's gfx_target_version into the dotted version of the
// LLVM target: major*10000 + minor*100 + stepping, so 90402 is gfx942
// ("9.4.2") and 90010 is gfx90a ("9.0.10", stepping a = 10). The encoding is
// HSA_GET_GFX_VERSION_FULL in the kernel's kfd_topology.h.
func gfxVersion(v uint64) (string, bool) {
	if v == 0 || v > 999999 {
		return "", false
	}
	return fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100), true
}

// architecture maps a gfx target to the lowercase family name of the
// attribute schema. Sources: the LLVM AMDGPU processor table
// (llvm.org/docs/AMDGPUUsage.html, "Processors") and ROCm's "GPU
// specifications" page: gfx908 CDNA (MI100), gfx90a CDNA2 (MI200),
// gfx940/941/942 CDNA3 (MI300), gfx950 CDNA4 (MI350), gfx10.1 RDNA, gfx10.3
// RDNA2, gfx11 RDNA3, gfx12 RDNA4. Anything else is "" (not published).
func architecture(v uint64) string {
	major, minor, step := v/10000, v/100%100, v%100
	switch {
	case major == 9 && minor == 0 && step == 8:
		return "cdna"
	case major == 9 && minor == 0 && step == 10:
		return "cdna2"
	case major == 9 && minor == 4:
		return "cdna3"
	case major == 9 && minor == 5:
		return "cdna4"
	case major == 10 && minor == 1:
		return "rdna"
	case major == 10 && minor == 3:
		return "rdna2"
	case major == 11:
		return "rdna3"
	case major == 12:
		return "rdna4"
	}
	return ""
}
