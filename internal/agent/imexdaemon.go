package agent

import (
	"fmt"
	"path/filepath"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/backend"
	"github.com/tessera-gpu/tessera/internal/imex"
	"github.com/tessera-gpu/tessera/internal/imex/daemonpod"
	"github.com/tessera-gpu/tessera/internal/mps"
	"github.com/tessera-gpu/tessera/internal/sim"
)

// Who runs the node's IMEX daemon (--imex-daemons).
const (
	// IMEXDaemonsHost: the host's nvidia-imex service; the agent only
	// asks it.
	IMEXDaemonsHost = "host"
	// IMEXDaemonsPod: the agent, as a pod of its node
	// (internal/imex/daemonpod).
	IMEXDaemonsPod = "pod"
	// DefaultIMEXDaemonDir is --imex-daemon-dir's default off the
	// simulator.
	DefaultIMEXDaemonDir = "/var/run/tessera/imex"
	// imexDaemonProgram is NVIDIA's IMEX daemon.
	imexDaemonProgram = "nvidia-imex"
)

// validateIMEXDaemons checks --imex-daemons and, with pod, that the pod is
// fully described: it shares the MPS daemon pods' image, account and
// namespace, the agent's one set of daemon pod rights.
func (c *Config) validateIMEXDaemons() error {
	switch c.IMEXDaemons {
	case IMEXDaemonsHost, "":
		return nil
	case IMEXDaemonsPod:
	default:
		return fmt.Errorf("--imex-daemons=%q: want %s or %s", c.IMEXDaemons, IMEXDaemonsHost, IMEXDaemonsPod)
	}
	if c.IMEXChannels == 0 {
		return fmt.Errorf("--imex-daemons=pod needs --imex-channels: the daemon runs for claims of IMEX channels")
	}
	if c.Backend == "nvml" && c.NvidiaDriverRoot == "" {
		return fmt.Errorf("--imex-daemons=pod needs --nvidia-driver-root: the daemon pod runs the driver's %s", imexDaemonProgram)
	}
	if c.MPSDaemonNamespace == "" {
		c.MPSDaemonNamespace = c.IMEXNamespace
	}
	for _, f := range []struct{ flag, v string }{
		{"--mps-daemon-image", c.MPSDaemonImage},
		{"--mps-daemon-service-account", c.MPSDaemonServiceAccount},
	} {
		if f.v == "" {
			return fmt.Errorf("%s is required with --imex-daemons=pod (the IMEX daemon pod's, as the MPS daemon pods')", f.flag)
		}
	}
	return nil
}

// imexDaemonDir is where the daemon's files live: --imex-daemon-dir, or
// on the simulator the node's <sim-state-dir>/imex, where the stand-in's
// control program looks by default.
func (c *Config) imexDaemonDir(simulated bool) string {
	if c.IMEXDaemonDir != "" {
		return c.IMEXDaemonDir
	}
	if simulated {
		return filepath.Join(c.SimStateDir, "imex")
	}
	return DefaultIMEXDaemonDir
}

// imexDaemon is the node's IMEX daemon as the agent runs it, with
// --imex-daemons=pod (nil otherwise), and h, the node's IMEX, pointed at
// its config file: the program the pod runs is the driver root's
// nvidia-imex with its libraries (the sim: the stand-in beside the
// agent), and the control program asks it through the config in the
// daemon's directory.
func (c *Config) imexDaemon(logger klog.Logger, b backend.Backend, client kubernetes.Interface, h *imex.Host) (*daemonpod.Daemon, error) {
	if c.IMEXDaemons != IMEXDaemonsPod || h == nil {
		return nil, nil
	}
	_, simulated := b.(*sim.Backend)
	dir := c.imexDaemonDir(simulated)
	cfg := daemonpod.Config{Settings: c.daemonPodSettings(), Client: client, Dir: dir}
	if simulated {
		exe, err := executable()
		if err != nil {
			return nil, fmt.Errorf("--imex-daemons=pod: find the stand-in beside the agent: %w", err)
		}
		cfg.Program = []string{filepath.Join(filepath.Dir(exe), "tessera-sim"), "imex"}
		h.Ctl = []string{filepath.Join(filepath.Dir(exe), "tessera-sim"), "imex-ctl", "-c", filepath.Join(dir, daemonpod.ConfigName)}
	} else {
		r, ok, err := c.driverRoot()
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, fmt.Errorf("--imex-daemons=pod needs --nvidia-driver-root: the daemon pod runs the driver's %s", imexDaemonProgram)
		}
		daemon, err := r.Binary(imexDaemonProgram)
		if err != nil {
			return nil, fmt.Errorf("--imex-daemons=pod: %w", err)
		}
		ctl, err := r.Binary(imex.CtlProgram)
		if err != nil {
			return nil, fmt.Errorf("--imex-daemons=pod: %w", err)
		}
		_, libDir, err := c.nvmlLibrary(logger)
		if err != nil {
			return nil, fmt.Errorf("--imex-daemons=pod: %w", err)
		}
		// As the MPS daemon pods: the driver's programs run from the
		// root's mount, outside it, with its libraries.
		cfg.DriverRoot, cfg.DriverRootMount = c.NvidiaDriverRoot, c.driverRootMount()
		cfg.Program = []string{daemon}
		cfg.Env = map[string]string{mps.EnvLibraryPath: libDir}
		h.Root, h.Ctl, h.Env = "", []string{ctl, "-c", filepath.Join(dir, daemonpod.ConfigName)}, []string{mps.EnvLibraryPath + "=" + libDir}
	}
	d, err := daemonpod.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("--imex-daemons=pod: %w", err)
	}
	logger.Info("The node's IMEX daemon runs as a pod of the node, started for the first claim of a channel", "dir", dir, "program", cfg.Program, "imexCtl", h.Ctl)
	return d, nil
}
