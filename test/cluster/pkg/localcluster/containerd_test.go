package localcluster

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
)

// TestContainerdNodesApart: two nodes of a cluster, and the same node of
// two clusters, get their own socket, bridge and subnet, and
// each node's containerd and CNI configuration point at its own.
func TestContainerdNodesApart(t *testing.T) {
	a := &Config{Dir: "/x/cluster-a", BinDir: "/x/bin", Runtime: RuntimeContainerd, Nodes: []Node{{Name: "n1"}, {Name: "n2"}}}
	b := &Config{Dir: "/x/cluster-b", BinDir: "/x/bin", Runtime: RuntimeContainerd, Nodes: []Node{{Name: "n1"}}}
	if err := a.checkNetworks(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, x := range []struct {
		c    *Config
		node string
	}{{a, "n1"}, {a, "n2"}, {b, "n1"}} {
		who := x.c.Dir + "/" + x.node
		for _, v := range []string{x.c.ContainerdSocket(x.node), x.c.bridge(x.node), x.c.podSubnet(x.node)} {
			if other, ok := seen[v]; ok {
				t.Errorf("%s and %s share %s", other, who, v)
			}
			seen[v] = who
		}
		if len(x.c.bridge(x.node)) > 15 {
			t.Errorf("bridge name %s is longer than an interface name may be", x.c.bridge(x.node))
		}
		if _, _, err := net.ParseCIDR(x.c.podSubnet(x.node)); err != nil {
			t.Error(err)
		}

		// containerd parses it for real in the containerd e2e suite.
		text := x.c.containerdConfig(x.node)
		for _, want := range []string{
			"address = \"" + x.c.ContainerdSocket(x.node) + "\"",
			"cdi_spec_dirs = [\"" + x.c.CDIDir(x.node) + "\"]",
			PauseImage, "restrict_oom_score_adj = true", "netns_mounts_under_state_dir = true",
		} {
			if !strings.Contains(text, want) {
				t.Errorf("%s: containerd config lacks %q", who, want)
			}
		}
		var cni struct {
			Plugins []struct {
				Bridge string `json:"bridge"`
				IPAM   struct {
					Ranges [][]struct {
						Subnet string `json:"subnet"`
					} `json:"ranges"`
				} `json:"ipam"`
			} `json:"plugins"`
		}
		if err := json.Unmarshal([]byte(x.c.cniConfig(x.node)), &cni); err != nil {
			t.Fatalf("CNI config of %s: %v", who, err)
		}
		if p := cni.Plugins[0]; p.Bridge != x.c.bridge(x.node) || p.IPAM.Ranges[0][0].Subnet != x.c.podSubnet(x.node) {
			t.Errorf("%s: CNI bridge %s subnet %s", who, p.Bridge, p.IPAM.Ranges[0][0].Subnet)
		}
	}
}
