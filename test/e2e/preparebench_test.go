package e2e

import (
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/preparebench"
)

// TestPrepareBench: the harness behind `make bench-prepare` runs an agent
// as its own process for a node of its own against this cluster's API
// server, prepares and unprepares through its socket, and leaves no claim
// and no node behind.
func TestPrepareBench(t *testing.T) {
	ctx := t.Context()
	agent := preparebench.Tessera(filepath.Join(repo, "bin/tessera-kubelet-plugin"))
	flooded, err := preparebench.TesseraFlooded(filepath.Join(repo, "bin/tessera-kubelet-plugin"), 16, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := preparebench.Run(ctx, client, cluster.Kubeconfig(), filepath.Join(cluster.Dir, "prepare-bench"), []preparebench.Driver{agent, flooded},
		preparebench.Options{Sequential: 3, Waves: 2, InFlight: 8, Rounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		t.Logf("%+v", *r)
		if r.PrepareP50 <= 0 || r.UnprepareP50 <= 0 || r.GetP50 <= 0 || r.PrepareRate <= 0 || r.UnprepareRate <= 0 {
			t.Errorf("a figure is missing: %+v", *r)
		}
	}
	// The flood was real: the agent answered it throughout.
	if r := res[1]; r.ReadyzRate <= 0 || r.ReadyzFailed != 0 {
		t.Errorf("readiness flood: %.0f answered/s, %d unanswered", r.ReadyzRate, r.ReadyzFailed)
	}
	claims, err := client.ResourceV1().ResourceClaims(preparebench.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) != 0 {
		t.Errorf("%d claims left in %s", len(claims.Items), preparebench.Namespace)
	}
	if _, err := client.CoreV1().Nodes().Get(ctx, preparebench.NodePrefix+"0", metav1.GetOptions{}); err == nil {
		t.Error("the harness's node is left")
	}
}
