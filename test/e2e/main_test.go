// Package e2e runs Tessera in a real local cluster (etcd, kube-apiserver,
// kube-scheduler, kube-controller-manager, one kubelet per simulated GPU
// node, each with a fake CRI runtime that resolves CDI like containerd) and
// checks every demo scenario end to end.
//
// Run through `make test` (or `make e2e`), which builds the binaries first.
package e2e

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

// nodes: the local cluster's default nodes (the demo's) (one of them partitions dynamically) plus
// one whose H100s hold static MIG instances cut in advance, so both ways to
// serve a MIG claim run, and an MI300X node that sets compute modes per claim.
var nodes = append(append([]localcluster.Node{}, localcluster.DefaultNodes...), localcluster.Node{Name: "gpu-h100-mig", Profile: "dgx-h100-mig"},
	// AMD compute partitions carved on demand (demo 22; the demo's cluster
	// declares it the same way).
	localcluster.Node{Name: amdDynamicNode, Profile: "mi300x-8", Partitioning: "dynamic"})

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	repo, err = filepath.Abs("../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cluster = localcluster.ForRepo(repo)
	// Its own directory: the suite can run while a demo cluster is up.
	cluster.Dir = filepath.Join(repo, "_output/e2e-cluster")
	cluster.Nodes = nodes
	// Gangs and pod-group claims (gang_test.go); the other tests' pods
	// belong to no group, which the scheduler handles as before.
	cluster.Workloads = true
	return e2eutil.Run(m, cluster, &client)
}
