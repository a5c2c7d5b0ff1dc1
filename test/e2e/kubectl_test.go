package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/scenario"
)

// kubectlTessera runs the kubectl plugin against the e2e cluster.
func kubectlTessera(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(repo, "bin/kubectl-tessera"), append(args, "--kubeconfig="+cluster.Kubeconfig())...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl tessera %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestKubectlTessera: the plugin's inventory shows who holds a GPU in the
// live cluster, and topo draws a node's fabric from its published slices.
func TestKubectlTessera(t *testing.T) {
	ns := namespace(t)
	gpuPod(t, ns, "holder", "gpu-h100")
	if err := scenario.WaitRunning(context.Background(), client, ns, []string{"holder"}, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	inv := kubectlTessera(t, "inventory", "gpu-h100")
	if !strings.Contains(inv, ns+"/holder (pod holder)") || !strings.Contains(inv, "node gpu-h100: 8 GPUs (8x H100): 7 free, 1 in use") {
		t.Errorf("inventory does not show the pod's claim:\n%s", inv)
	}
	for node, want := range map[string]string{"gpu-h100": "NV18", "gpu-mi300x": "XGMI"} {
		if out := kubectlTessera(t, "topo", node); !strings.Contains(out, want) {
			t.Errorf("topo %s lacks %s:\n%s", node, want, out)
		}
	}
	deleteAll(t, ns)
}
