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
func newNVML(c *Config, logger klog.Logger, launcher mps.Launcher) (backend.Backend, error) {
	b, err := nvml.New(nvml.Options{SysfsRoot: c.SysfsRoot, Logger: logger, NvidiaSMI: c.NvidiaSMI, MPSControl: strings.Fields(c.MPSControl), MPSRoot: c.MPSRoot, MPSLauncher: launcher, HealthPollInterval: c.HealthPoll})
	if err != nil {
		return nil, fmt.Errorf("--backend=nvml: %w", err)
	}
	return b, nil
}

func detectNVML() (bool, string) { return nvml.Detect() }
