// Package containerd runs Tessera in a local cluster whose nodes run real
// containers: containerd, runc and CNI per node, the node agents installed
// with the Helm chart as a DaemonSet (one release per node), and the demo
// scenarios' pods running the probe image, whose log shows the device
// nodes, environment and mounts each container really got.
//
// Run through `make test` (or `make e2e-containerd`), which builds the
// binaries first.
package containerd

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

// nodes: a static H100 node, a dynamic one (partitions carved at prepare)
// and an L4 node with capacity shares (a shared MPS daemon per GPU, on an
// R615 driver: MPS v3, a namespace per share), each with its own
// containerd. The fake-runtime suite's L4 node keeps legacy MPS (l4-4).
// Two GB200 trays of one NVLink domain, whose agents run the trays' IMEX
// daemons as pods (imex_test.go).
var nodes = []localcluster.Node{
	{Name: "ctr-h100", Profile: "dgx-h100"},
	{Name: "ctr-h100-dynamic", Profile: "dgx-h100", Partitioning: "dynamic"},
	{Name: "ctr-l4-shared", Profile: "l4-4-r615", Sharing: "capacity"},
	{Name: "ctr-tray-1", Profile: "gb200-nvl72-tray"},
	{Name: "ctr-tray-2", Profile: "gb200-nvl72-tray"},
}

// imexChannels is how many IMEX channels the trays' domain offers.
const imexChannels = 2

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	repo, err = filepath.Abs("../../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cluster = localcluster.ForRepo(repo)
	// Its own directory: the suite can run while a demo cluster is up.
	cluster.Dir = filepath.Join(repo, "_output/e2e-containerd-cluster")
	cluster.Nodes = nodes
	cluster.Runtime = localcluster.RuntimeContainerd
	cluster.IMEXChannels = imexChannels
	return e2eutil.Run(m, cluster, &client)
}
