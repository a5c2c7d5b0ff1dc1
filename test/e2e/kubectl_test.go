package e2e

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-gpu/tessera/test/cluster/pkg/localcluster"
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

// kubectlTesseraStatus runs the plugin and returns its output and whether
// it exited 0.
func kubectlTesseraStatus(t *testing.T, args ...string) (string, bool) {
	t.Helper()
	out, err := exec.Command(filepath.Join(repo, "bin/kubectl-tessera"), append(args, "--kubeconfig="+cluster.Kubeconfig())...).CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("kubectl tessera %s: %v", strings.Join(args, " "), err)
	}
	return string(out), err == nil
}

// TestKubectlTesseraExplain: for demo 08's pod, which the real scheduler
// leaves Pending, explain agrees that no node fits and names the
// fabric-island constraint no set of devices meets.
func TestKubectlTesseraExplain(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	sc, err := scenario.Load(filepath.Join(repo, "demo/08-unsatisfiable.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.Apply(ctx, client, ns); err != nil {
		t.Fatal(err)
	}
	if _, err := scenario.WaitUnschedulable(ctx, client, ns, "too-big-job", 90*time.Second); err != nil {
		t.Fatal(err)
	}
	out := kubectlTessera(t, "explain", "pod/too-big-job", "-n", ns)
	for _, want := range []string{"fits on no node", "matchAttribute gpu.tessera.dev/fabricIsland"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
	deleteAll(t, ns)
}

// TestKubectlTesseraDoctor: doctor passes on the healthy cluster (each
// agent's readiness asked at the metrics address the cluster printed) and,
// with one node's agent stopped, fails naming that node.
func TestKubectlTesseraDoctor(t *testing.T) {
	s, err := cluster.LoadState()
	if err != nil {
		t.Fatal(err)
	}
	// The agents' certificates are the cluster CA's; /readyz needs no token.
	args := []string{"doctor", "--metrics-ca-file", cluster.MetricsCAFile()}
	for _, n := range nodes {
		args = append(args, "--metrics-url", n.Name+"="+localcluster.MetricsURL(s, n.Name))
	}
	if out, ok := kubectlTesseraStatus(t, args...); !ok || !strings.Contains(out, " 0 failed") {
		t.Fatalf("doctor on a healthy cluster failed:\n%s", out)
	}
	restartPlugin(t, "gpu-mixed", func() {
		out, ok := kubectlTesseraStatus(t, args...)
		if ok || !strings.Contains(out, "gpu-mixed/readyz") {
			t.Errorf("doctor with gpu-mixed's agent stopped: exit 0 %v\n%s", ok, out)
		}
	})
}
