package agent

import (
	"fmt"
	"os"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/tessera-gpu/tessera/internal/mps"
	"github.com/tessera-gpu/tessera/internal/mps/daemonpod"
	"github.com/tessera-gpu/tessera/internal/nodepod"
)

// Where the MPS control daemons run (--mps-daemons).
const (
	// MPSDaemonsProcess: detached children of the agent. Where the agent
	// runs in a container of its own PID namespace they die with it.
	MPSDaemonsProcess = "process"
	// MPSDaemonsPod: pods of the node (internal/mps/daemonpod).
	MPSDaemonsPod = "pod"
)

// validateMPSDaemons checks --mps-daemons and, with pod, that the daemon
// pods are fully described: a pod the agent cannot describe would only fail
// at the first MPS claim, long after start.
func (c *Config) validateMPSDaemons() error {
	switch c.MPSDaemons {
	case MPSDaemonsProcess, "":
		return nil
	case MPSDaemonsPod:
	default:
		return fmt.Errorf("--mps-daemons=%q: want %s or %s", c.MPSDaemons, MPSDaemonsProcess, MPSDaemonsPod)
	}
	if c.MPSDaemonNamespace == "" {
		c.MPSDaemonNamespace = os.Getenv("POD_NAMESPACE")
	}
	for _, f := range []struct{ flag, v string }{
		{"--mps-daemon-namespace (or POD_NAMESPACE)", c.MPSDaemonNamespace},
		{"--mps-daemon-image", c.MPSDaemonImage},
		{"--mps-daemon-service-account", c.MPSDaemonServiceAccount},
	} {
		if f.v == "" {
			return fmt.Errorf("%s is required with --mps-daemons=pod", f.flag)
		}
	}
	return nil
}

// daemonPodSettings are what the agent's daemon pods share, MPS's and
// IMEX's (--mps-daemon-*), without the driver root, which each mounts
// where it runs the driver's program.
func (c *Config) daemonPodSettings() nodepod.Settings {
	return nodepod.Settings{
		Namespace: c.MPSDaemonNamespace, NodeName: c.NodeName,
		Image: c.MPSDaemonImage, ServiceAccount: c.MPSDaemonServiceAccount,
		Privileged: c.MPSDaemonPrivileged, PriorityClassName: c.MPSDaemonPriorityClass,
	}
}

// mpsLauncher is what runs the MPS daemons: nil for the agent's own
// children, else a launcher of pods on this node through client.
func (c *Config) mpsLauncher(client kubernetes.Interface, logger klog.Logger) (mps.Launcher, error) {
	if c.MPSDaemons != MPSDaemonsPod {
		return nil, nil
	}
	settings := c.daemonPodSettings()
	settings.DriverRoot, settings.DriverRootMount = c.NvidiaDriverRoot, c.driverRootMount()
	l, err := daemonpod.New(daemonpod.Config{Settings: settings, Client: client, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("--mps-daemons=pod: %w", err)
	}
	logger.Info("MPS control daemons run as pods of the node", "namespace", c.MPSDaemonNamespace, "image", c.MPSDaemonImage, "privileged", c.MPSDaemonPrivileged)
	return l, nil
}
