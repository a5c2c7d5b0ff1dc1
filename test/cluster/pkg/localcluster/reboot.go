package localcluster

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/tessera-gpu/tessera/internal/sim"
)

// RebootNode does to one fake-runtime node what a reboot does to a
// machine: its plugin, kubelet and runtime die without cleaning up, with
// its MPS daemons; what lives in memory or on tmpfs goes (the fake
// runtime's containers and records, the CDI specs, the CRI socket, the
// kubelet's mounts); the simulated hardware gets a new boot id
// (tessera-sim reboot), so it forgets partitions, MIG mode and time-slice
// intervals. What is on disk stays: the kubelet's root with the plugin's
// checkpoint. Then runtime, kubelet and plugin start again.
func (c *Config) RebootNode(s *State, node string) error {
	if c.RuntimeOf() != RuntimeFake {
		return fmt.Errorf("reboot node %s: only fake-runtime nodes can be rebooted, not %s", node, c.RuntimeOf())
	}
	n, ok := s.node(node)
	if !ok {
		return fmt.Errorf("reboot node %s: no such node", node)
	}
	if _, err := c.kill(s, "plugin-"+node); err != nil {
		return fmt.Errorf("reboot node %s: %w", node, err)
	}
	kubelet, err := c.StopKubelet(s, node)
	if err != nil {
		return fmt.Errorf("reboot node %s: %w", node, err)
	}
	if _, err := c.kill(s, "fake-runtime-"+node); err != nil {
		return fmt.Errorf("reboot node %s: %w", node, err)
	}
	simDir := c.SimStateDir(node)
	if _, _, err := sim.Reboot(simDir, sim.MPSRoot(simDir)); err != nil {
		return fmt.Errorf("reboot node %s: %w", node, err)
	}
	if errs := unmountAll(c.RunDir(node)); len(errs) > 0 {
		return fmt.Errorf("reboot node %s: unmount under %s: %v", node, c.RunDir(node), errs)
	}
	for _, d := range []string{c.CDIDir(node), c.RecordDir(node)} {
		if err := emptyDir(d); err != nil {
			return fmt.Errorf("reboot node %s: %w", node, err)
		}
	}
	if err := os.Remove(c.criSocket(node)); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("reboot node %s: %w", node, err)
	}
	if err := c.startFakeRuntime(s, node); err != nil {
		return fmt.Errorf("reboot node %s: %w", node, err)
	}
	if err := c.StartKubelet(s, kubelet); err != nil {
		return fmt.Errorf("reboot node %s: %w", node, err)
	}
	if err := c.StartPlugin(s, n); err != nil {
		return fmt.Errorf("reboot node %s: %w", node, err)
	}
	return nil
}

func (s *State) node(name string) (Node, bool) {
	for _, n := range s.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Node{}, false
}

// emptyDir removes what dir holds and keeps dir.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("empty %s: %w", dir, err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("empty %s: %w", dir, err)
		}
	}
	return nil
}
