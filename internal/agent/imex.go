package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/imex"
	"github.com/tessera-gpu/tessera/internal/sim"

	"github.com/tessera-gpu/tessera/internal/channelpool"
)

// validateIMEX checks --imex-channels and fills --imex-namespace from the
// agent's pod's namespace.
func (c *Config) validateIMEX() error {
	if c.IMEXChannels == 0 {
		return nil
	}
	if c.IMEXChannels < 0 || c.IMEXChannels > channelpool.MaxChannels {
		return fmt.Errorf("--imex-channels=%d: want 0 (none) or 1 to %d", c.IMEXChannels, channelpool.MaxChannels)
	}
	if c.IMEXNamespace == "" {
		c.IMEXNamespace = os.Getenv("POD_NAMESPACE")
	}
	if c.IMEXNamespace == "" {
		return fmt.Errorf("--imex-namespace (or POD_NAMESPACE) is required with --imex-channels")
	}
	return nil
}

// imexHost is the node's IMEX as the agent reaches it, with --imex-channels
// (nil without): /proc, and the control program (--imex-ctl or the
// backend's default).
func (c *Config) imexHost(logger klog.Logger, b backend.Backend) (*imex.Host, error) {
	if c.IMEXChannels == 0 {
		return nil, nil
	}
	if s, ok := b.(*sim.Backend); ok {
		ctl := strings.Fields(c.IMEXCtl)
		if len(ctl) == 0 {
			exe, err := executable()
			if err != nil {
				return nil, fmt.Errorf("--imex-ctl: find the stand-in beside the agent: %w", err)
			}
			ctl = []string{filepath.Join(filepath.Dir(exe), "tessera-sim"), "imex-ctl", "-c", filepath.Join(c.SimStateDir, "imex", "config.cfg")}
		}
		return &imex.Host{ProcRoot: s.ProcRoot(), Ctl: ctl}, nil
	}
	h := &imex.Host{ProcRoot: "/proc", Ctl: strings.Fields(c.IMEXCtl)}
	if len(h.Ctl) > 0 {
		return h, nil
	}
	h.Ctl = []string{imex.CtlProgram, "-c", imex.DefaultConfigFile}
	r, ok, err := c.driverRoot()
	if err != nil || !ok {
		return h, err
	}
	// The driver's program runs inside its root, with its libraries, as
	// on the host.
	p, err := r.Binary(imex.CtlProgram)
	if err != nil {
		return nil, fmt.Errorf("--imex-channels: %w", err)
	}
	rel, err := filepath.Rel(r.Mount, p)
	if err != nil {
		return nil, fmt.Errorf("--imex-channels: %w", err)
	}
	h.Root, h.Ctl[0] = r.Mount, "/"+rel
	logger.Info("Asking the node's IMEX daemon through the driver root's control program", "driverRoot", r.Host, "imexCtl", h.Ctl[0])
	return h, nil
}
