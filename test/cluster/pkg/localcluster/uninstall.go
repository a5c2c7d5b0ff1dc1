package localcluster

import (
	"fmt"
	"path/filepath"
	"time"
)

// UninstallAgent runs `helm uninstall` of node's agent release, as an
// operator does: its hooks refuse while claims are in use and clean the
// node after. It returns helm's output, with the error when it fails.
func (c *Config) UninstallAgent(node string, timeout time.Duration) (string, error) {
	ch, err := c.packagedChart()
	if err != nil {
		return "", err
	}
	out, err := ch.Uninstall(c.Kubeconfig(), AgentRelease(node), AgentNamespace, timeout)
	if err != nil {
		return out, fmt.Errorf("node %s: uninstall the chart: %w", node, err)
	}
	return out, nil
}

// ReinstallAgent installs node's release again from the chart package with
// the values it was first installed with.
func (c *Config) ReinstallAgent(node string) error {
	ch, err := c.packagedChart()
	if err != nil {
		return err
	}
	values := filepath.Join(c.NodeDir(node), "agent-values.json")
	if err := ch.Install(c.Kubeconfig(), AgentRelease(node), AgentNamespace, values); err != nil {
		return fmt.Errorf("node %s: install the chart again: %w", node, err)
	}
	return nil
}
