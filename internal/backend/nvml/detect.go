//go:build cgo && linux

package nvml

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Detect reports whether NVML works on this host, for --backend=auto, and
// why not. It initialises NVML and shuts it down again, so nothing stays
// open: loading the library alone would say yes on a host whose kernel
// driver is missing. libraryPath is as Options.LibraryPath.
func Detect(libraryPath string) (ok bool, reason string) { return detect(newLib(libraryPath)) }

// newLib is NVML from path, or libnvidia-ml.so.1 by the loader's search
// when path is empty.
func newLib(path string) nvml.Interface {
	if path == "" {
		return nvml.New()
	}
	return &pathLib{Interface: nvml.New(nvml.WithLibraryPath(path)), path: path}
}

// pathLib is NVML loaded from a path, which initLib's errors name.
type pathLib struct {
	nvml.Interface
	path string
}

// libraryPath is the path lib was loaded from, "" for the loader's search.
func libraryPath(lib nvml.Interface) string {
	if p, ok := lib.(*pathLib); ok {
		return p.path
	}
	return ""
}

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
