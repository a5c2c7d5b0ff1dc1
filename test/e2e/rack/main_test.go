// Package rack runs Tessera on a GB200 NVL72 rack in a local cluster: four
// simulated compute trays of one multi-node NVLink domain, each running
// the IMEX daemon stand-in as a host service (as nvidia-imex.service runs
// on a real tray), and a DGX H100 outside any domain. The trays' agents
// offer the domain's IMEX channels (docs/rack.md).
//
// Run through `make test` (or `make e2e`), which builds the binaries
// first; it runs after test/e2e, never beside it: one local cluster at a
// time.
package rack

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/e2eutil"
	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
)

var (
	cluster *localcluster.Config
	client  kubernetes.Interface
	repo    string
)

// trays are the rack's compute trays; outside is a node of no domain.
var (
	trays   = []string{"tray-1", "tray-2", "tray-3", "tray-4"}
	outside = "gpu-h100"
)

// channels is how many channels the domain offers: two jobs at once, and
// a third that waits.
const channels = 2

func TestMain(m *testing.M) {
	var err error
	repo, err = filepath.Abs("../../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cluster = localcluster.ForRepo(repo)
	cluster.Dir = filepath.Join(repo, "_output/e2e-rack-cluster")
	cluster.Nodes = nil
	for _, t := range trays {
		cluster.Nodes = append(cluster.Nodes, localcluster.Node{Name: t, Profile: "gb200-nvl72-tray"})
	}
	cluster.Nodes = append(cluster.Nodes, localcluster.Node{Name: outside, Profile: "dgx-h100"})
	cluster.IMEXChannels = channels
	os.Exit(e2eutil.Run(m, cluster, &client))
}
