package agent

import (
	"fmt"
	"strings"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/backend/nvml"
	"github.com/tessera-gpu/tessera/internal/mps"
)

// newNVML opens the one long-lived NVML session; Run closes it on exit.
// libnvidia-ml and the MPS control program come from the driver root when
// one is set.
func newNVML(c *Config, logger klog.Logger, launcher mps.Launcher) (backend.Backend, error) {
	lib, libDir, err := c.nvmlLibrary(logger)
	if err != nil {
		return nil, fmt.Errorf("--backend=nvml: %w", err)
	}
	control, err := c.driverMPSControl(logger)
	if err != nil {
		return nil, fmt.Errorf("--backend=nvml: %w", err)
	}
	if control == nil {
		control = strings.Fields(c.MPSControl)
	}
	b, err := nvml.New(nvml.Options{LibraryPath: lib, SysfsRoot: c.SysfsRoot, Logger: logger, NvidiaSMI: c.NvidiaSMI, MPSControl: control, MPSLibraryPath: libDir, MPSRoot: c.MPSRoot, MPSLauncher: launcher, HealthPollInterval: c.HealthPoll})
	if err != nil {
		return nil, fmt.Errorf("--backend=nvml: %w", err)
	}
	return b, nil
}

// detectNVML says whether NVML works, loaded from the driver root when one
// is set; a root without libnvidia-ml says which paths were tried.
func detectNVML(c *Config, logger klog.Logger) (bool, string) {
	lib, _, err := c.nvmlLibrary(logger)
	if err != nil {
		return false, err.Error()
	}
	return nvml.Detect(lib)
}
