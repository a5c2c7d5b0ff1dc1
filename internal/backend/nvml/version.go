package nvml

import (
	"fmt"
	"strconv"
	"strings"
)

// driverSemver turns NVML's driver version ("580.65.06", sometimes only
// "550.54") into the schema's semver form: leading zeros dropped, padded to
// three parts ("580.65.6"). It returns "" for anything not numeric.
func driverSemver(v string) string {
	parts := strings.Split(strings.TrimSpace(v), ".")
	if len(parts) == 0 || len(parts) > 3 {
		return ""
	}
	for len(parts) < 3 {
		parts = append(parts, "0")
	}
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return ""
		}
		parts[i] = strconv.FormatUint(n, 10)
	}
	return strings.Join(parts, ".")
}

// cudaDriverVersion formats nvmlSystemGetCudaDriverVersion's integer, which
// NVML documents as 1000*major + 10*minor (12040 -> "12.4").
func cudaDriverVersion(v int) string {
	if v <= 0 {
		return ""
	}
	return fmt.Sprintf("%d.%d", v/1000, (v%1000)/10)
}

// computeCapability formats CUDA's major.minor as the schema's semver.
func computeCapability(major, minor int) string {
	return fmt.Sprintf("%d.%d.0", major, minor)
}
