//go:build cgo && linux

package nvml

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Detect reports whether NVML works on this host, for --backend=auto, and
// why not. It initialises NVML and shuts it down again, so nothing stays
// open: loading the library alone would say yes on a host whose kernel
// driver is missing.
func Detect() (ok bool, reason string) { return detect(nvml.New()) }

func detect(lib nvml.Interface) (bool, string) {
	if err := initLib(lib); err != nil {
		return false, err.Error()
	}
	defer func() { _ = lib.Shutdown() }()
	n, ret := lib.DeviceGetCount()
	if err := check("nvmlDeviceGetCount", ret); err != nil {
		return false, fmt.Sprintf("nvml loaded but %v", err)
	}
	if n == 0 {
		return false, "nvml loaded but reports no GPUs"
	}
	v, _ := lib.SystemGetDriverVersion()
	return true, fmt.Sprintf("libnvidia-ml loaded: driver %s, %d GPUs", v, n)
}
