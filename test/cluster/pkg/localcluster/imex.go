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

// imexHosts are the nodes in a multi-node NVLink domain, by node order.
func (c *Config) imexHosts() ([]imexHost, error) {
	if c.IMEXChannels == 0 || c.RuntimeOf() != RuntimeFake {
		return nil, nil
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
		out = append(out, imexHost{node: n.Name, domain: d, address: "127.0.0." + strconv.Itoa(len(byDomain[d]))})
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

// imexArgs are the agent flags of node: the domain's channels where it
// runs an IMEX daemon.
func (c *Config) imexArgs(node string) []string {
	hosts, _ := c.imexHosts() // checked at Up
	if !slices.ContainsFunc(hosts, func(h imexHost) bool { return h.node == node }) {
		return nil
	}
	return []string{"--imex-channels=" + strconv.Itoa(c.IMEXChannels), "--imex-namespace=" + IMEXNamespace}
}
