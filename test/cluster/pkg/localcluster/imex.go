package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/tessera-gpu/tessera/internal/imex"
	"github.com/tessera-gpu/tessera/internal/sim"
)

// A fake node whose simulated machine is in a multi-node NVLink domain (a
// GB200 tray) runs, with IMEXChannels, what a real tray runs as a host
// service: the IMEX daemon, here the stand-in (tessera-sim imex), with the
// domain's trays as its peers. The trays share this machine, so each gets
// a loopback address of its own (127.0.0.<k>), all on the domain's one
// port, as real trays share SERVER_PORT on their own addresses. Its agent
// offers the domain's channels and asks the stand-in through
// tessera-sim imex-ctl with the config at IMEXConfig.

// IMEXNamespace holds the domains' leases of the fake nodes' agents.
const IMEXNamespace = "kube-system"

// imexHost is a node that runs an IMEX daemon.
type imexHost struct {
	node, domain, address string
	peers                 []string // the domain's addresses, in order
}

// A containerd node's agent runs the daemon itself instead, as a pod of
// its node (the chart's imex.daemons=pod): the stand-in of the sim image on
// the host network, at the address its release's imex.address gives it
// (127.0.1.<k>: the trays share this machine and its one InternalIP), on
// the daemon's default port.

// imexHosts are the nodes in a multi-node NVLink domain, by node order.
func (c *Config) imexHosts() ([]imexHost, error) {
	if c.IMEXChannels == 0 {
		return nil, nil
	}
	net := "127.0.0."
	if c.RuntimeOf() == RuntimeContainerd {
		net = "127.0.1."
	}
	var out []imexHost
	byDomain := map[string][]int{}
	for _, n := range c.Nodes {
		m, err := sim.Profile(n.Profile, n.Name)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
		d := ""
		for _, g := range m.Node.GPUs {
			if g.FabricDomain != "" {
				d = g.FabricDomain
			}
		}
		if d == "" {
			continue
		}
		byDomain[d] = append(byDomain[d], len(out))
		out = append(out, imexHost{node: n.Name, domain: d, address: net + strconv.Itoa(len(byDomain[d]))})
	}
	for _, idx := range byDomain {
		var peers []string
		for _, i := range idx {
			peers = append(peers, out[i].address)
		}
		for _, i := range idx {
			out[i].peers = slices.Clone(peers)
		}
	}
	return out, nil
}

// imexPort is the port name of domain's daemons.
func imexPort(domain string) string { return "imex-" + domain }

// IMEXConfig is the IMEX daemon's config file of a node (its stand-in's,
// which the agent's --imex-ctl default reads).
func (c *Config) IMEXConfig(node string) string {
	return filepath.Join(c.SimStateDir(node), "imex", "config.cfg")
}

// startIMEX writes h's daemon config and nodes file and starts it.
func (c *Config) startIMEX(s *State, h imexHost) error {
	cfg := imex.DefaultConfig()
	cfg.ServerPort = s.Ports[imexPort(h.domain)]
	cfg.NodesFile = filepath.Join(filepath.Dir(c.IMEXConfig(h.node)), "nodes_config.cfg")
	cfg.CmdUnixSocket = filepath.Join(c.RunDir(h.node), "imex.sock")
	nodes, err := imex.NodesFile(h.peers)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(cfg.NodesFile), 0o755); err != nil {
		return err
	}
	for f, data := range map[string][]byte{cfg.NodesFile: nodes, c.IMEXConfig(h.node): cfg.Render()} {
		if err := os.WriteFile(f, data, 0o644); err != nil {
			return err
		}
	}
	_, err = c.start(s, "imex-"+h.node, filepath.Join(filepath.Dir(c.PluginBin), "tessera-sim"), "imex", "-c", c.IMEXConfig(h.node), "--address="+h.address)
	return err
}

// imexValues are the chart values of a containerd node's release: the
// domain's channels, the daemon as the agent's pod, and the node's
// address; nil for a node in no domain.
func (c *Config) imexValues(node string) map[string]any {
	hosts, _ := c.imexHosts() // checked at Up
	for _, h := range hosts {
		if h.node == node {
			return map[string]any{"channels": c.IMEXChannels, "daemons": "pod", "address": h.address}
		}
	}
	return nil
}

// hostIMEX reports whether the fake nodes' IMEX daemons run as host
// services of the cluster (a containerd node's agent runs its own).
func (c *Config) hostIMEX() bool { return c.RuntimeOf() == RuntimeFake }

// imexArgs are the agent flags of node: the domain's channels where it
// runs an IMEX daemon.
func (c *Config) imexArgs(node string) []string {
	hosts, _ := c.imexHosts() // checked at Up
	if !slices.ContainsFunc(hosts, func(h imexHost) bool { return h.node == node }) {
		return nil
	}
	return []string{"--imex-channels=" + strconv.Itoa(c.IMEXChannels), "--imex-namespace=" + IMEXNamespace}
}
