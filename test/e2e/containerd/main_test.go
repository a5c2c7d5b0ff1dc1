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
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
)

var (
	cluster *localcluster.Config
	client  kubernetes.Interface
	repo    string
)

// nodes: a static H100 node, a dynamic one (partitions carved at prepare)
// and an L4 node with capacity shares (a shared MPS daemon per GPU), each
// with its own containerd.
var nodes = []localcluster.Node{
	{Name: "ctr-h100", Profile: "dgx-h100"},
	{Name: "ctr-h100-dynamic", Profile: "dgx-h100", Partitioning: "dynamic"},
	{Name: "ctr-l4-shared", Profile: "l4-4", Sharing: "capacity"},
}

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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	if err := cluster.Up(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: cluster up:", err)
		return 1
	}
	fmt.Printf("e2e: cluster up in %s\n", time.Since(start).Round(100*time.Millisecond))
	code := 1
	defer func() {
		if err := cluster.Down(os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: cluster down:", err)
			code = 1
		}
		if code != 0 {
			fmt.Fprintf(os.Stderr, "e2e: component logs kept in %s\n", cluster.LogDir())
		}
	}()
	if client, err = cluster.Client(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code = m.Run()
	return code
}
